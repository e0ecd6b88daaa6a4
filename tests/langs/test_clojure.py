"""clojure through the real HTTP API and the real sandbox: langs/clojure's harness (AOT-compiled,
runner/src/kiln/harness.clj) loads check/solution.clj, calls `solution` for each argument list of
asserts.json and prints DESIGN.md's protocol; otherwise the solution runs as `clojure
solution.clj` in check/.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import pytest

import langcase

pytestmark = langcase.only("clojure")
CLOJURE = langcase.LANGS["clojure"]


def test_output_while_loading_comes_first(lang_server):
    got = CLOJURE.items(CLOJURE.run(lang_server, '(println "loading ✓")\n' + CLOJURE.solution))
    assert got[0] == {"type": "output", "value": "loading ✓\n"}
    assert [i["type"] for i in got[1:]] == ["result"] * 3


def test_values_become_json(lang_server):
    solution = (
        "(defn solution [k]\n  (case k\n"
        '    "map" {:a 1 "b" [nil true 1.5] :c #{:x}}\n'
        '    "big" (*\' 99999999999 99999999999 99999999999)\n'
        '    "nan" [##NaN ##Inf 1/4]\n'
        '    "text" (str "ünï " \\c " \\"q\\" \\u0001")\n'
        '    "lazy" (map (fn [i] (println "realising" i) (* i i)) (range 3))\n'
        '    k))\n'
    )
    arguments = [["map"], ["big"], ["nan"], ["text"], ["lazy"], [{"x": [1, {"y": None}]}]]
    got = CLOJURE.items(CLOJURE.run(lang_server, solution, arguments=arguments))
    assert [i["type"] for i in got] == ["result"] * 6, got
    values = [i["value"] for i in got]
    assert values[0] == {"a": 1, "b": [None, True, 1.5], "c": ["x"]}
    assert values[1] == 99999999999**3
    assert values[2] == [None, None, 0.25]
    assert values[3] == 'ünï c "q" \u0001'
    assert values[4] == [0, 1, 4]
    assert got[4]["output"] == "realising 0\nrealising 1\nrealising 2\n"  # realised within the call
    assert values[5] == {"x": [1, {"y": None}]}  # JSON objects arrive as maps with string keys


def test_a_solution_in_its_own_namespace_is_found(lang_server):
    solution = '(ns my.solution\n  (:require [clojure.string :as str]))\n\n(defn solution [a b]\n  (str/join "-" [a b]))\n'
    got = CLOJURE.items(CLOJURE.run(lang_server, solution, arguments=[[1, 2]]))
    assert got[0]["value"] == "1-2"


def test_plain_mode_without_asserts_keeps_the_exit_status(lang_server):
    body = CLOJURE.run(lang_server, '(println "bye")\n(System/exit 7)\n', asserts=None)
    assert (body["exit_code"], body["stdout"]) == (7, "bye\n")


def test_system_exit_while_loading_ends_as_the_plain_script_would(lang_server):
    """With asserts.json in harness shape: what loading printed and the exit's status (the
    harness held the output for its report, which never comes)."""
    body = CLOJURE.run(lang_server, '(println "bye")\n(System/exit 7)\n')
    assert (body["exit_code"], body["stdout"]) == (7, "bye\n")


def test_a_load_error_passes_through_as_clojure_reports_it(lang_server):
    body = CLOJURE.run(lang_server, '(println "first")\n(defn solution [a b] (+ a b)\n')
    assert (body["exit_code"], body["stdout"]) == (1, "first\n")
    assert body["stderr"].startswith("Syntax error reading source at (solution.clj:3:1).\nEOF while reading")


def test_no_callable_solution_runs_as_a_plain_script(lang_server):
    body = CLOJURE.run(lang_server, '(println "just a script")\n(def solution 42)\n')
    assert langcase.ran(body) == (0, "just a script\n", "")


def test_system_exit_in_a_call_is_that_calls_error(lang_server):
    solution = '(defn solution [a b]\n  (println "call" a)\n  (when (= a 10) (System/exit 3))\n  (+ a b))\n'
    got = CLOJURE.items(CLOJURE.run(lang_server, solution))
    assert [(i["type"], i["output"]) for i in got] == [("result", "call 1\n"), ("error", "call 10\n")]
    assert "exit" in got[1]["value"]


# each prints "loading" while the harness loads it (println, and print without a newline on the
# last), then its load ends abruptly
ABRUPT_LOADS = {
    "halt": ('(println "loading")\n(.halt (Runtime/getRuntime) 3)\n', "loading\n", "exited", 3),
    "kill": (
        '(println "loading")\n(.waitFor (.exec (Runtime/getRuntime) (into-array String ["sh" "-c" (str "kill -9 " (.pid (java.lang.ProcessHandle/current)))])))\n',
        "loading\n",
        "signaled",
        137,
    ),
    "timeout": ('(println "loading")\n(loop [] (recur))\n', "loading\n", "timed_out", None),
    "oom": ('(println "loading")\n(def kept (doall (repeatedly 48 #(byte-array (* 8 1024 1024)))))\n', "loading\n", "out_of_memory", 137),
    "print-then-halt": ('(print "loading")\n(.halt (Runtime/getRuntime) 3)\n', "loading", "exited", 3),
}


@pytest.mark.parametrize("way", list(ABRUPT_LOADS))
def test_what_loading_printed_reaches_stdout_however_the_load_ends(lang_server, way):
    """The harness holds what loading prints for its report (kiln/runtime.py HELD_STDOUT), and a
    load that ends abruptly still passes it on."""
    solution, stdout, outcome, exit_code = ABRUPT_LOADS[way]
    body = CLOJURE.run(lang_server, solution + "(defn solution [a b] (+ a b))\n", timeout="10s", limits={"memory": "256m"})
    assert (body["stdout"], body["stats"]["outcome"], body["exit_code"]) == (stdout, outcome, exit_code), body
