# A Ruby solution as kiln's ruby harness runs it (Codebattle's convention): a top-level method
# `solution`, called once per argument list of asserts.json ({"arguments": [[1, 2], ...]}).
# What it prints during a call becomes that call's "output"; an exception, that call's "error".
def solution(a, b)
  puts "adding #{a} and #{b}"
  a + b
end
