(ns main
  (:require [adder :refer [add]]))

(let [a (read) b (read)]
  (println (add a b)))
