;; An example solution for kiln's clojure workspace (no checker: the harness calls `solution`
;; for each argument list of asserts.json, see asserts.json here, and prints the protocol).
(defn solution [a b]
  (println "adding" a "and" b)
  (+ a b))
