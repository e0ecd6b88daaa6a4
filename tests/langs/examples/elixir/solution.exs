# An Elixir solution as kiln's elixir harness runs it (Codebattle's convention): module Solution
# with solution/N, called once per argument list of asserts.json ({"arguments": [[1, 2], ...]}).
# What it prints during a call becomes that call's "output"; a raise, throw or exit, that call's
# "error".
defmodule Solution do
  def solution(a, b) do
    IO.puts("adding #{a} and #{b}")
    a + b
  end
end
