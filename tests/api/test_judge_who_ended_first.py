"""An interactive /judge test judged by who ended first, as Kattis (problemtools' judge/execute.py
with its interactive runner), DOMjudge (testcase_run.sh: "a WA may override TLE and RTE") and
Codeforces judge: an interactor that ended first with WA or PE has its verdict, whatever the
submission then does on the closed pipe; a submission that ended first keeps its own verdict.
Each side's end is kiln-init's stamp of its reap (the result's ended_ms, on the host's one
CLOCK_MONOTONIC). A real server; Python, and C++ for a death by SIGPIPE."""

from __future__ import annotations

import pytest

from kilntest import Server

# reads the first guess, says it is wrong and leaves: the submission's next read is end-of-file
WRONG_AT_ONCE = "import sys\nsys.stdin.readline()\nprint('wrong from the first guess', file=sys.stderr)\nsys.exit(1)\n"
# the same with testlib's PE
MALFORMED_AT_ONCE = WRONG_AT_ONCE.replace("wrong from the first guess", "not a number").replace("exit(1)", "exit(2)")
# waits for a word; end-of-file first is a WA
WAITS_FOR_A_WORD = "import sys\nif not sys.stdin.readline():\n    print('said nothing', file=sys.stderr); sys.exit(1)\n"
# takes a word, says '=', and leaves content
CONTENT_AT_ONCE = "import sys\nsys.stdin.readline()\nprint('=', flush=True)\n"

GUESSES_THEN_READS = "print(1, flush=True)\ninput()\n"  # input() raises EOFError on the closed pipe
GUESSES_THEN_SLEEPS = "import time\nprint(1, flush=True)\ntime.sleep(60)\n"  # stopped by kiln at its wall time
GUESSES_THEN_SPINS = "print(1, flush=True)\nwhile True:\n    pass\n"  # stopped by kiln at its CPU time
GUESSES_FOREVER_CPP = '#include <cstdio>\nint main() { for (;;) { std::puts("1"); std::fflush(stdout); } }\n'  # SIGPIPE


@pytest.fixture(scope="module")
def server():
    srv = Server({"RUN_LANGS": "python,cpp", "RUN_CONCURRENCY": "4"}).wait_ready()
    yield srv
    srv.stop()


def judged_all(srv, solution: str, interactor: str, lang: str = "python", count: int = 1, **fields) -> list[dict]:
    body = {"lang_slug": lang, "solution_text": solution, "tests": [{"stdin": "5"}] * count, "interactor": {"lang_slug": "python", "source": interactor}, **fields}
    answer = srv.client.post("/judge", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()["tests"]


def judged(srv, solution: str, interactor: str, lang: str = "python", **fields) -> dict:
    [test] = judged_all(srv, solution, interactor, lang, **fields)
    return test


def test_an_interactors_wrong_answer_stands_when_the_submission_then_fails_on_the_closed_pipe(server):
    test = judged(server, GUESSES_THEN_READS, WRONG_AT_ONCE)
    assert (test["verdict"], test["checker_message"]) == ("WA", "wrong from the first guess\n"), test
    assert test["exit_code"] == 1 and "EOFError" in test["stderr"], test  # its own end is still shown
    assert judged(server, GUESSES_THEN_READS, MALFORMED_AT_ONCE)["verdict"] == "PE"
    # every test of a request the same way (each pair in slots of its own)
    assert [t["verdict"] for t in judged_all(server, GUESSES_THEN_READS, WRONG_AT_ONCE, count=6)] == ["WA"] * 6


def test_an_interactors_wrong_answer_stands_when_the_submission_then_dies_of_sigpipe(server):
    test = judged(server, GUESSES_FOREVER_CPP, WRONG_AT_ONCE, lang="cpp")
    assert test["verdict"] == "WA" and test["stats"]["signal"] == 13, test


@pytest.mark.parametrize("solution", [GUESSES_THEN_SLEEPS, GUESSES_THEN_SPINS], ids=["idle", "spinning"])
def test_an_interactors_wrong_answer_stands_when_the_submission_then_hangs_until_kiln_stops_it(server, solution):
    # kiln ended it for time after the interactor's end: that end is kiln's, the WA was first
    test = judged(server, solution, WRONG_AT_ONCE, limits={"time": "1s", "wall_time": "1500ms"})
    assert test["verdict"] == "WA" and test["exit_code"] is None and test["stats"]["outcome"] == "timed_out", test


def test_a_submission_that_ends_first_keeps_its_own_verdict_whatever_the_interactor_then_says(server):
    crashes = judged(server, "import sys\nsys.exit(3)\n", WAITS_FOR_A_WORD)
    assert (crashes["verdict"], crashes["checker_message"]) == ("RE", "said nothing\n"), crashes
    # it ran out of its time while the interactor still waited for it: TLE
    spins = judged(server, "while True:\n    pass\n", WAITS_FOR_A_WORD, limits={"time": "500ms", "wall_time": "2s"})
    assert spins["verdict"] == "TLE" and spins["checker_message"] == "said nothing\n", spins
    sleeps = judged(server, "import time\ntime.sleep(60)\n", WAITS_FOR_A_WORD, limits={"time": "1s", "wall_time": "1s"})
    assert sleeps["verdict"] == "TLE", sleeps


def test_an_interactor_content_first_leaves_the_submissions_own_verdict_and_its_ac_unchanged(server):
    # the interactor's AC never hides what the submission then did (Kattis: RTE; Codeforces waits for it)
    test = judged(server, "print(1, flush=True)\nassert input() == '='\ninput()\n", CONTENT_AT_ONCE)
    assert test["verdict"] == "RE" and "EOFError" in test["stderr"], test
    assert judged(server, "print(1, flush=True)\nassert input() == '='\n", CONTENT_AT_ONCE)["verdict"] == "AC"
    # the submission ends first, content; then the interactor says its verdict
    assert judged(server, "print(1, flush=True)\n", WAITS_FOR_A_WORD)["verdict"] == "AC"
    assert judged(server, "pass\n", WAITS_FOR_A_WORD)["verdict"] == "WA"
