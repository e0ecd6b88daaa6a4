#include <bits/stdc++.h>

using namespace std;

int solution(int a, int b) {
  cout << "adding " << a << " and " << b << endl;
  return a + b;
}
