require_relative 'adder'

a, b = $stdin.read.split.map(&:to_i)
puts add(a, b)
