def add(a, b)
  a + b
end
