-- A module without main.
module Adder where

add :: Integer -> Integer -> Integer
add a b = a + b
