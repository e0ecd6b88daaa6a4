int solution(int a, int b) {
  return a + b;
}
