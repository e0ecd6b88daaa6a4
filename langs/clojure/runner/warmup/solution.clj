;; Install-time warm-up only (see ../../Makefile `prepare`): typical solution code, so that the
;; classes it touches land in the class data sharing archive.
(require '[clojure.string :as str]
         '[clojure.set :as set])

(defn solution [a b text ratio flag names words]
  (println "sum of" a "and" b)
  (let [counts (frequencies words)
        joined (str/join "," (map str/upper-case (filter seq words)))
        letters (set (str/lower-case text))
        sorted (sort > (map #(mod (* % a) 7) (range 1 11)))
        queue (conj clojure.lang.PersistentQueue/EMPTY a b)
        merged (merge-with + {"x" 1} counts)
        big (reduce + (map-indexed (fn [i v] (if (even? i) v (long (* ratio 10)))) sorted))]
    (when (neg? a)
      (throw (ex-info "negative" {:a a})))
    {:sum (+ a b (count queue) (count letters) (count joined) big (if flag 1 0) (count names))
     :words (vec (sort (keys merged)))
     :common (set/intersection (set words) #{"x" "z"})
     :ratio (/ a 3)
     :nested [(str/reverse joined) (subs text 1) [1.5 nil true]]}))
