(let [a (read) b (read)]
  (println (+ a b)))
