"""The shape of /run's and /judge's answers on the wire (DESIGN.md, "HTTP contract" and "Judge
API"): every key, in its order, each value's JSON type (an integer is not a float: a score of 3
is `3`, a wall time `41.0`), and which keys are left out when, for a representative set of
answers from a real server: a /run, a /judge with AC, WA, TLE and RE tests, a CE, a checker's
partial score with points and groups, the streamed answer's lines, a checker that does not build.

The expected shapes are tests/api/answer_shapes.json, captured from a server before the answer
was typed (kiln/judge/answer.py, kiln/http/answers.py). Times and outputs vary: a leaf is its type
name, except the values that say what happened (verdicts, outcomes, scores, counts), kept as they
are. KILN_WRITE_SHAPES=1 writes the file from the server instead of comparing (a deliberate change
of the contract: review its diff)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kilntest import Server

SHAPES = Path(__file__).with_name("answer_shapes.json")
KEPT = {"verdict", "outcome", "event", "index", "passed", "total", "score", "max_score", "name", "exit_code", "signal", "error"}
NDJSON = {"Accept": "application/x-ndjson"}

DOUBLES = "import sys\nn = int(input())\nif n == 3:\n    while True: pass\nif n == 4:\n    sys.exit(3)\nprint(2 * n if n != 2 else 0)\n"
PARTIAL = (
    "import sys\n"
    "given = open(sys.argv[1]).read().split()\n"
    "if given[1] == 'ac':\n    sys.exit(0)\n"
    "if given[1] == 'wa':\n    print('wrong'); sys.exit(1)\n"
    "print('points', given[1], 'partly right', file=sys.stderr)\n"
    "sys.exit(7)\n"
)


@pytest.fixture(scope="module")
def server():
    # one test at a time: which tests run before a failure is known (and so are SK) is then fixed
    srv = Server({"RUN_LANGS": "python", "RUN_CONCURRENCY": "4", "RUN_JUDGE_PARALLEL": "1"}).wait_ready()
    yield srv
    srv.stop()


def shape(value, key: str | None = None):
    """The value with each leaf its JSON type's name (or itself, for the KEPT keys); objects keep
    their keys' order."""
    if isinstance(value, dict):
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    if key in KEPT:
        return value
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}[type(value)]


def judge_body(tests, solution=DOUBLES, **fields) -> dict:
    return {"lang_slug": "python", "solution_text": solution, "tests": tests, **fields}


def checked_with_groups() -> dict:
    tests = [{"stdin": "1 ac", "points": 3}, {"stdin": "2 1.5", "points": 3}, {"stdin": "3 wa"}, {"stdin": "4 ac"}, {"stdin": "5 0.5"}]
    groups = [{"name": "1", "tests": [2, 3], "points": 10}, {"name": "2", "tests": [4], "points": 4, "scoring": "sum", "depends": ["1"]}]
    return judge_body(tests, "print(1)\n", compare="checker", checker={"lang_slug": "python", "source": PARTIAL}, groups=groups)


def streamed(srv, request: dict) -> list:
    """The stream's lines, each shaped; the test lines (which come as tests end) by index."""
    with srv.client.stream("POST", "/judge", json=request, headers=NDJSON) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line]
    tests = sorted((line for line in lines if line["event"] == "test"), key=lambda line: line["index"])
    return [shape(line) for line in [lines[0], *tests, lines[-1]]]


def answers(srv) -> dict:
    """The representative answers, each shaped, by name."""
    plain = [{"stdin": "1", "expected": "2"}, {"stdin": "2", "expected": "4"}, {"stdin": "3", "expected": "6"}, {"stdin": "4", "expected": "8"}]
    post = srv.client.post
    got = {
        "run": post("/run", json={"lang_slug": "python", "solution_text": "print(5)\n"}),
        "run timed out": post("/run", json={"lang_slug": "python", "solution_text": "while True: pass\n", "timeout": "1s"}),
        "judge AC WA TLE RE": post("/judge", json=judge_body(plain, limits={"time": "300ms"})),
        "judge CE": post("/judge", json=judge_body(plain[:2], "print(\n")),
        "judge AC stop_on_failure": post("/judge", json=judge_body(plain[:1] + [plain[1]] + plain[:1], stop_on_failure=True)),
        "judge points and groups": post("/judge", json=checked_with_groups()),
        "judge points only": post("/judge", json=judge_body([{"stdin": "1", "expected": "2", "points": 2.5}, {"stdin": "2", "expected": "4", "points": 1}])),
        "judge line_floats dmoj": post("/judge", json=judge_body(plain[:2], "print(int(input()) * 2.00001)\n", compare="line_floats", relative_epsilon=1e-4, float_rule="dmoj")),
        "judge tolerance 400": post("/judge", json=judge_body(plain[:1], compare="float", epsilon=1e-6, absolute_epsilon=1e-6)),
        "checker does not build": post("/judge", json=judge_body(plain[:1], compare="checker", checker={"lang_slug": "python", "source": "print(\n"})),
    }
    shaped = {name: {"status": response.status_code, "body": shape(response.json())} for name, response in got.items()}
    shaped["stream AC WA TLE RE"] = streamed(srv, judge_body(plain, "import sys\n" + DOUBLES.replace("import sys\n", "# streamed\n", 1), limits={"time": "300ms"}))
    shaped["stream points and groups"] = streamed(srv, {**checked_with_groups(), "solution_text": "print(1)  # streamed\n"})
    shaped["stream CE"] = streamed(srv, judge_body(plain[:1], "print(  # streamed\n"))
    return shaped


def test_answers_keep_their_keys_order_and_types(server):
    got = json.dumps(answers(server), indent=1)
    if os.environ.get("KILN_WRITE_SHAPES") == "1":
        SHAPES.write_text(got + "\n")
        pytest.skip(f"wrote {SHAPES}")
    assert got + "\n" == SHAPES.read_text()
