import sys

from adder import add

a, b = map(int, sys.stdin.read().split())
print(add(a, b))
