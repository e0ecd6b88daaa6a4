#include <iostream>

int main() {
    long long a, b;
    std::cin >> a >> b;
    std::cout << sum(a, b) << '\n';
}
