#include <iostream>

long long add(long long a, long long b);  // adder.cpp

int main() {
    long long a, b;
    std::cin >> a >> b;
    std::cout << add(a, b) << '\n';
}
