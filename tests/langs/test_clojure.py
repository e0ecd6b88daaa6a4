"""clojure through the real HTTP API and the real sandbox: langs/clojure's harness (AOT-compiled,
runner/src/kiln/harness.clj) loads check/solution.clj, calls `solution` for each argument list of
asserts.json and prints DESIGN.md's protocol; otherwise the solution runs as `clojure
solution.clj` in check/."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "clojure"
SOLUTION = (EXAMPLES / "solution.clj").read_text()
ASSERTS = json.loads((EXAMPLES / "asserts.json").read_text())
TIMEOUT = "30s"  # a JVM: generous, these tests assert behaviour, not speed
SECONDS = re.compile(r"^\d+\.\d{7}$")


def _missing() -> str | None:
    for exe in ("clojure", "java"):
        if shutil.which(exe, path="/usr/local/bin:/usr/bin:/bin") is None:
            return f"{exe} is not installed: run langs/clojure/install.sh"
    if not (REPO / "langs" / "clojure" / "runner" / "harness.jar").is_file():
        return "the workspace is not prepared (runner/harness.jar): run langs/clojure/install.sh"
    return None


@pytest.fixture(scope="module")
def clojure():
    reason = _missing()
    if reason:
        pytest.skip(f"clojure: {reason}")
    server = Server({"RUN_LANGS": "clojure", "RUN_CONCURRENCY": "2"}).wait_ready(120)
    yield server
    server.stop()


def run(server, solution: str, asserts=ASSERTS, timeout: str = TIMEOUT) -> dict:
    fields = {} if asserts is None else {"asserts": asserts}
    response = server.run(lang_slug="clojure", solution_text=solution, timeout=timeout, **fields)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    assert body["stats"]["outcome"] == "exited", body
    assert body["stdout"].count("\n") == 1, body
    return json.loads(body["stdout"])


def test_a_plus_b_in_the_harness_protocol(clojure):
    body = run(clojure, SOLUTION)
    assert body["stderr"] == ""
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 30, "adding 10 and 20\n"),
        ("result", 0, "adding -5 and 5\n"),
    ]
    assert all(SECONDS.match(i["time"]) for i in got), got
    assert [list(i) for i in got] == [["type", "value", "time", "output"]] * 3


def test_an_error_in_one_call_leaves_the_others(clojure):
    solution = '(defn solution [a b]\n  (println "in" a)\n  (when (neg? a) (throw (ex-info "negative!" {:a a})))\n  (/ b a))\n'
    got = items(run(clojure, solution, asserts={"arguments": [[1, 2], [-5, 5], [0, 1], [2, 1]]}))
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 2, "in 1\n"),
        ("error", "negative!", "in -5\n"),
        ("error", "Divide by zero", "in 0\n"),
        ("result", 0.5, "in 2\n"),  # a ratio, as a JSON number
    ]


def test_output_while_loading_comes_first(clojure):
    got = items(run(clojure, '(println "loading ✓")\n' + SOLUTION))
    assert got[0] == {"type": "output", "value": "loading ✓\n"}
    assert [i["type"] for i in got[1:]] == ["result"] * 3


def test_values_become_json(clojure):
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
    got = items(run(clojure, solution, asserts={"arguments": arguments}))
    assert [i["type"] for i in got] == ["result"] * 6, got
    values = [i["value"] for i in got]
    assert values[0] == {"a": 1, "b": [None, True, 1.5], "c": ["x"]}
    assert values[1] == 99999999999**3
    assert values[2] == [None, None, 0.25]
    assert values[3] == 'ünï c "q" \u0001'
    assert values[4] == [0, 1, 4]
    assert got[4]["output"] == "realising 0\nrealising 1\nrealising 2\n"  # realised within the call
    assert values[5] == {"x": [1, {"y": None}]}  # JSON objects arrive as maps with string keys


def test_a_solution_in_its_own_namespace_is_found(clojure):
    solution = '(ns my.solution\n  (:require [clojure.string :as str]))\n\n(defn solution [a b]\n  (str/join "-" [a b]))\n'
    got = items(run(clojure, solution, asserts={"arguments": [[1, 2]]}))
    assert got[0]["value"] == "1-2"


def test_plain_program_mode(clojure):
    solution = '(require \'[clojure.data.json :as json])\n(let [d (json/read-str (slurp "asserts.json"))]\n  (println (+ (d "a") (d "b"))))\n'
    body = run(clojure, solution, asserts='{"a": 2, "b": 3}')
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, "5\n", "")


def test_plain_mode_without_asserts_keeps_the_exit_status(clojure):
    body = run(clojure, '(println "bye")\n(System/exit 7)\n', asserts=None)
    assert (body["exit_code"], body["stdout"]) == (7, "bye\n")


def test_a_load_error_passes_through_as_clojure_reports_it(clojure):
    body = run(clojure, '(println "first")\n(defn solution [a b] (+ a b)\n')
    assert body["exit_code"] == 1
    assert body["stdout"] == "first\n"
    assert body["stderr"].startswith("Syntax error reading source at (solution.clj:3:1).\nEOF while reading")


def test_no_callable_solution_runs_as_a_plain_script(clojure):
    body = run(clojure, '(println "just a script")\n(def solution 42)\n')
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, "just a script\n", "")


def test_system_exit_in_a_call_is_that_calls_error(clojure):
    solution = '(defn solution [a b]\n  (println "call" a)\n  (when (= a 10) (System/exit 3))\n  (+ a b))\n'
    got = items(run(clojure, solution))
    assert [(i["type"], i["output"]) for i in got] == [("result", "call 1\n"), ("error", "call 10\n")]
    assert "exit" in got[1]["value"]


def test_an_infinite_loop_times_out(clojure):
    body = run(clojure, "(defn solution [a b]\n  (loop [] (recur)))\n", timeout="2s")
    assert body["stats"]["outcome"] == "timed_out", body
    assert body["exit_code"] is None
