(ns kiln.harness
  "kiln's Clojure harness: runs check/solution.clj in kiln's `clojure` workspace (../../README.md).

  Started in check/ (the Makefile cds there first), as the AOT-compiled main class kiln.harness.
  - Harness mode, when asserts.json is {\"arguments\": [[arg, ...], ...]}: load solution.clj as
    `clojure solution.clj` would (namespace user), call `solution` with each argument list, print
    one JSON array line of result/error items (per-call time and output), exit 0.
  - Plain mode otherwise, or pass-through when loading fails or defines no callable `solution`:
    the solution runs as `clojure solution.clj` (clojure.main's own script runner) would."
  (:require [clojure.data.json :as json]
            [clojure.main :as main]
            [clojure.string :as string])
  (:import (java.io ByteArrayOutputStream File FileDescriptor FileOutputStream OutputStream
                    OutputStreamWriter PrintStream Writer)
           (java.nio.charset StandardCharsets)
           (java.nio.file Files LinkOption OpenOption Paths StandardOpenOption)
           (java.util Locale))
  (:gen-class))

(set! *warn-on-reflection* true)

(def ^:private solution-file "solution.clj")
(def ^:private asserts-file "asserts.json")

;; ---------------------------------------------------------------------------------------------
;; JSON text of a Clojure value: maps -> objects (keyword keys by name), sequential and set-like
;; collections and arrays -> arrays, exact integers (BigInt too), ratios as doubles, NaN and
;; infinities -> null (strict JSON), characters, keywords and symbols -> strings, anything else
;; its str. Non-ASCII text is written as it is (the report is UTF-8); lone surrogates escaped.

(defn- write-string [^StringBuilder sb ^String s]
  (.append sb \")
  (let [n (.length s)]
    (loop [i 0]
      (when (< i n)
        (let [c (.charAt s i)]
          (case c
            \" (.append sb "\\\"")
            \\ (.append sb "\\\\")
            \newline (.append sb "\\n")
            \return (.append sb "\\r")
            \tab (.append sb "\\t")
            \backspace (.append sb "\\b")
            \formfeed (.append sb "\\f")
            (cond
              (< (int c) 0x20)
              (.append sb (format "\\u%04x" (int c)))

              (and (Character/isHighSurrogate c) (< (inc i) n) (Character/isLowSurrogate (.charAt s (inc i))))
              (-> sb (.append c) (.append (.charAt s (inc i))))

              (Character/isSurrogate c)
              (.append sb (format "\\u%04x" (int c)))

              :else (.append sb c)))
          (recur (if (and (Character/isHighSurrogate c) (< (inc i) n) (Character/isLowSurrogate (.charAt s (inc i))))
                   (+ i 2)
                   (inc i)))))))
  (.append sb \"))

(defn- key-text [k]
  (cond (string? k) k
        (keyword? k) (subs (str k) 1)
        (nil? k) "null"
        :else (str k)))

(defn- write-json [^StringBuilder sb x]
  (cond
    (nil? x) (.append sb "null")
    (instance? Boolean x) (.append sb (if x "true" "false"))
    (string? x) (write-string sb x)
    (or (instance? Long x) (instance? Integer x) (instance? Short x) (instance? Byte x)
        (instance? clojure.lang.BigInt x) (instance? BigInteger x)) (.append sb (str x))
    (or (instance? Double x) (instance? Float x))
    (let [d (double x)]
      (.append sb (if (or (Double/isNaN d) (Double/isInfinite d)) "null" (str x))))
    (decimal? x) (.append sb (str x))
    (instance? Number x) (write-json sb (.doubleValue ^Number x))
    (char? x) (write-string sb (str x))
    (keyword? x) (write-string sb (subs (str x) 1))
    (symbol? x) (write-string sb (str x))
    (instance? java.util.Map x)
    (do (.append sb \{)
        (loop [entries (seq x), first? true]
          (when entries
            (let [^java.util.Map$Entry e (first entries)]
              (when-not first? (.append sb \,))
              (write-string sb (key-text (.getKey e)))
              (.append sb \:)
              (write-json sb (.getValue e))
              (recur (next entries) false))))
        (.append sb \}))
    (or (coll? x) (seq? x) (instance? Iterable x) (.isArray (class x)))
    (do (.append sb \[)
        (loop [items (seq x), first? true]
          (when items
            (when-not first? (.append sb \,))
            (write-json sb (first items))
            (recur (next items) false)))
        (.append sb \]))
    :else (write-string sb (str x))))

(defn- json-text ^String [x]
  (let [sb (StringBuilder.)]
    (write-json sb x)
    (.toString sb)))

;; ---------------------------------------------------------------------------------------------
;; Output capture: while the harness runs the solution, System/out and *out* both write to one
;; in-memory sink (UTF-8), read and reset after loading and after each call. stderr is untouched.
;; While the solution loads, what reaches the sink is also written at once to kiln's HELD_STDOUT
;; (kiln/runtime.py), and *out* flushes every write: a load ended abruptly (Runtime.halt, a kill,
;; the timeout, an OOM) leaves what it printed there, and kiln-init passes it on as stdout. Once
;; loaded, the file is closed and unlinked (unhold).

(def ^:private held-path "/sandbox/check/.kiln-held-stdout")
(def ^:private held (atom nil)) ; the held file's stream while loading, else nil

(def ^:private ^ByteArrayOutputStream sink (ByteArrayOutputStream.))
(def ^:private ^OutputStream sink-tee
  (proxy [OutputStream] []
    (write
      ([b]
       (if (integer? b)
         (do (.write sink (int b))
             (when-let [^OutputStream h @held] (.write h (int b))))
         (let [^bytes b b]
           (.write sink b 0 (alength b))
           (when-let [^OutputStream h @held] (.write h b)))))
      ([b off len]
       (.write sink ^bytes b (int off) (int len))
       (when-let [^OutputStream h @held] (.write h ^bytes b (int off) (int len)))))))
(def ^:private ^PrintStream sink-stream (PrintStream. sink-tee true "UTF-8"))
(def ^:private ^Writer sink-writer (OutputStreamWriter. sink-stream StandardCharsets/UTF_8))
(def ^:private ^Writer loading-writer
  (proxy [Writer] []
    (write
      ([x]
       (cond (string? x) (.write sink-writer ^String x)
             (integer? x) (.write sink-writer (int x))
             :else (.write sink-writer ^chars x))
       (.flush sink-writer))
      ([x off len]
       (if (string? x)
         (.write sink-writer ^String x (int off) (int len))
         (.write sink-writer ^chars x (int off) (int len)))
       (.flush sink-writer)))
    (flush [] (.flush sink-writer))
    (close [] (.flush sink-writer))))

(defn- hold []
  (try
    (reset! held (Files/newOutputStream (Paths/get held-path (make-array String 0))
                                        (into-array OpenOption [StandardOpenOption/CREATE_NEW StandardOpenOption/WRITE
                                                                LinkOption/NOFOLLOW_LINKS])))
    (catch Exception _ nil))) ; outside kiln's sandbox: the sink alone

(defn- unhold []
  (when-let [^OutputStream h @held]
    (reset! held nil)
    (try (.close h) (Files/deleteIfExists (Paths/get held-path (make-array String 0)))
         (catch Exception _ nil))))

(defn- take-output ^String []
  (.flush sink-writer)
  (.flush System/out)
  (let [text (.toString sink "UTF-8")]
    (.reset sink)
    text))

(defn- write-raw [^FileOutputStream stdout ^String text]
  (.write stdout (.getBytes text StandardCharsets/UTF_8))
  (.flush stdout))

;; ---------------------------------------------------------------------------------------------

(defn- read-arguments
  "The argument lists of asserts.json in harness shape, else nil (plain mode)."
  []
  (let [file (File. ^String asserts-file)]
    (when (.isFile file)
      (let [data (try (json/read-str (slurp file :encoding "UTF-8")) (catch Exception _ nil))
            arguments (when (map? data) (get data "arguments"))]
        (when (and (vector? arguments) (every? vector? arguments))
          arguments)))))

(defn- callable [v]
  (when (and (var? v) (bound? v))
    (let [f @v]
      (when (and (ifn? f) (not (coll? f)) (not (keyword? f)) (not (symbol? f)))
        f))))

(defn- find-solution
  "`solution` as loading defined it: in user, else in a namespace the file created."
  [namespaces-before]
  (or (callable (ns-resolve 'user 'solution))
      (some #(callable (get (ns-publics %) 'solution)) (remove namespaces-before (all-ns)))))

(defn- seconds [^long nanos]
  (String/format Locale/ROOT "%.7f" (object-array [(/ nanos 1e9)])))

(defn- message [^Throwable t]
  (or (.getMessage t) (.getName (class t))))

(defn- item [kind value-json elapsed output]
  (str "{\"type\":\"" kind "\",\"value\":" value-json ",\"time\":\"" (seconds elapsed)
       "\",\"output\":" (json-text output) "}"))

(defn- report [^FileOutputStream stdout items]
  (write-raw stdout (str "[" (string/join "," items) "]\n")))

(defn- run-calls
  "One item per argument list. Lazy results are realised while writing their JSON, inside the
  call's output capture (what they print belongs to the call), after its time is taken."
  [f arguments ^FileOutputStream stdout]
  (let [items (atom [])
        current (atom nil)]
    ;; System/exit inside a call: the report so far, that call as an error, status 0.
    (.addShutdownHook (Runtime/getRuntime)
                      (Thread. ^Runnable
                               (fn []
                                 (when-let [started @current]
                                   (let [output (try (take-output) (catch Throwable _ ""))]
                                     (report stdout (conj @items (item "error" (json-text "System.exit called during the call")
                                                                       (- (System/nanoTime) started) output))))
                                   (.halt (Runtime/getRuntime) 0)))))
    (doseq [args arguments]
      (let [start (System/nanoTime)
            _ (reset! current start)
            [ok value] (try [true (apply f args)] (catch Throwable t [false t]))
            elapsed (- (System/nanoTime) start)
            [ok text] (if ok
                        (try [true (json-text value)] (catch Throwable t [false t]))
                        [false value])
            output (take-output)]
        (swap! items conj (if ok
                            (item "result" text elapsed output)
                            (item "error" (json-text (message text)) elapsed output)))))
    (reset! current nil)
    @items))

(defn- harness [arguments]
  (let [stdout (FileOutputStream. FileDescriptor/out)
        before (set (all-ns))
        loading (atom true)]
    ;; System/exit while loading ends the run as a plain one: what loading printed goes out
    ;; as it is, the status is the exit's (a plain run of the script prints and exits alike)
    (.addShutdownHook (Runtime/getRuntime)
                      (Thread. ^Runnable (fn [] (when @loading (unhold) (write-raw stdout (try (take-output) (catch Throwable _ "")))))))
    (System/setOut sink-stream)
    (hold)
    (binding [*out* sink-writer]
      (main/with-bindings
        (in-ns 'user)
        (let [failure (try (binding [*out* loading-writer] (main/load-script solution-file)) nil (catch Throwable t t))
              _ (reset! loading false)
              _ (unhold)
              loaded (take-output)
              f (when-not failure (find-solution before))]
          (cond
            failure ; as clojure.main reports a script that throws, after what it printed
            (do (write-raw stdout loaded)
                (main/report-error failure :target (System/getProperty "clojure.main.report" "file"))
                (System/exit 1))

            (nil? f) ; no callable solution: the script has run; end as the plain program would
            (do (write-raw stdout loaded)
                (System/setOut (PrintStream. stdout true "UTF-8")))

            :else
            (let [items (run-calls f arguments stdout)]
              (report stdout (cond->> items
                               (seq loaded) (cons (str "{\"type\":\"output\",\"value\":" (json-text loaded) "}"))))
              ;; nothing the solution left behind (threads, shutdown hooks) prints after the
              ;; report or changes the status
              (.halt (Runtime/getRuntime) 0))))))))

(defn- wait-for-go
  "Started ahead of the request (Makefile `prestart`): the JVM and Clojure are up. Block until
  kiln's byte on descriptor 3, written once the request's files are in place; end-of-file
  without it means the slot was closed unused."
  []
  (with-open [go (java.io.FileInputStream. "/proc/self/fd/3")]
    (when (neg? (.read go))
      (.halt (Runtime/getRuntime) 0))))

(defn -main [& args]
  (when (= args ["--prestarted"])
    (wait-for-go))
  (if-let [arguments (read-arguments)]
    (harness arguments)
    (main/main solution-file)))
