(ns adder)

(defn add [a b]
  (+ a b))
