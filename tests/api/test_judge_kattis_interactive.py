"""`kiln judge` on Kattis interactive problems against a real server: the package's output
validator (C++ or Python) runs as the interactor through kiln's adapter
(kiln/packages/kattis_interactive.py), and a guessing problem judges as Kattis judges it: AC for
a binary search, WA for a wrong claim (with the validator's judgemessage.txt as the message),
TLE for a submission that never asks. Written from the Kattis problem package format's public
description; the other Kattis and DMOJ packages are in test_judge_packages.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kilntest import Server
from test_judge_cli import KEY, kiln_judge, rows, solution
from test_judge_packages import VALIDATE_H, write


@pytest.fixture(scope="module")
def srv():
    server = Server({"RUN_LANGS": "python,cpp", "RUN_API_KEYS": KEY}).wait_ready()
    yield server
    server.stop()


# the protocol: "? g" answered higher, lower or equal; "! x" the claim, at most 10 queries (1..1000)
GUESS_CPP = r"""#include "validate.h"
int main(int argc, char **argv) {
    init_io(argc, argv);
    long long n, guess;
    judge_in >> n;
    for (int asked = 0;; asked++) {
        std::string kind;
        if (!(std::cin >> kind >> guess)) wrong_answer("no guess after " + std::to_string(asked) + " queries");
        if (kind == "!") {
            if (guess == n) accept();
            wrong_answer("claimed " + std::to_string(guess) + ", the number is " + std::to_string(n));
        }
        if (asked == 10) wrong_answer("more than 10 queries");
        std::cout << (guess < n ? "higher" : guess > n ? "lower" : "equal") << std::endl;
    }
}
"""
GUESS_PY = """import sys


def verdict(code, words):
    with open(sys.argv[3] + "judgemessage.txt", "w") as message:
        message.write(words + "\\n")
    sys.exit(code)


def main():
    n = int(open(sys.argv[1]).read())
    limit = int(sys.argv[sys.argv.index("queries") + 1])  # validator_flags: queries 10
    for asked in range(limit + 1):
        words = sys.stdin.readline().split()
        if len(words) != 2:
            verdict(43, f"no guess after {asked} queries")
        kind, guess = words[0], int(words[1])
        if kind == "!":
            verdict(42, f"found {n} in {asked} queries") if guess == n else verdict(43, f"claimed {guess}, the number is {n}")
        print("higher" if guess < n else "lower" if guess > n else "equal", flush=True)
    verdict(43, f"more than {limit} queries")


if __name__ == "__main__":
    main()
"""
BINARY_SEARCH = """lo, hi = 1, 1000
while True:
    mid = (lo + hi) // 2
    print("?", mid, flush=True)
    reply = input()
    if reply == "equal":
        print("!", mid, flush=True)
        break
    lo, hi = (mid + 1, hi) if reply == "higher" else (lo, mid - 1)
"""
CLAIMS_ONE = 'print("! 1", flush=True)\n'
NEVER_ASKS = "input()\n"  # waits for the validator, which waits for it
CLAIMS_ONE_THEN_READS = 'print("! 1", flush=True)\ninput()\n'  # an EOFError once the validator has left


def guessing_package(folder: Path, problem: str, validator: dict[str, str]) -> Path:
    """Three secret numbers (never 1); a random one keeps the files new to the store."""
    numbers = {"sample/1": 700, "secret/1": random.randrange(2, 1001), "secret/2": random.randrange(2, 1001)}
    files = {"problem.yaml": problem, **validator}
    for name, n in numbers.items():
        files[f"data/{name}.in"] = f"{n}\n"
        files[f"data/{name}.ans"] = f"{n}\n"
    return write(folder, files)


def cpp_package(folder: Path) -> Path:
    problem = "name: Guess\nvalidation: custom interactive\nlimits: {time_limit: 1}\n"
    return guessing_package(folder, problem, {"output_validators/guess/validate.h": VALIDATE_H, "output_validators/guess/guess.cpp": GUESS_CPP})


def test_a_kattis_interactive_problem_with_a_cpp_validator_judges_ac_wa_and_tle(srv, tmp_path):
    package = cpp_package(tmp_path / "guess")
    done = kiln_judge(solution(tmp_path, BINARY_SEARCH), package, srv=srv)
    assert done.returncode == 0 and "verdict: AC, 3/3" in done.stdout, done.stdout + done.stderr
    assert "accepted" in done.stdout  # the validator's judgemessage.txt
    wrong = kiln_judge(solution(tmp_path, CLAIMS_ONE), package, srv=srv)
    assert wrong.returncode == 1, wrong.stderr
    assert [row[1] for row in rows(wrong.stdout)] == ["WA", "WA", "WA"], wrong.stdout
    assert "claimed 1, the number is 700" in wrong.stdout
    silent = kiln_judge(solution(tmp_path, NEVER_ASKS), package, "--stop-on-failure", srv=srv)
    assert silent.returncode == 1, silent.stderr
    assert [row[1] for row in rows(silent.stdout)][0] == "TLE", silent.stdout


def test_a_validators_wrong_answer_that_ends_first_stands_when_the_submission_then_crashes(srv, tmp_path):
    # as Kattis judges (problemtools judge/execute.py: a validator that exited first with 43 is
    # followed): WA, not the RE of the submission's EOFError on the closed pipe
    done = kiln_judge(solution(tmp_path, CLAIMS_ONE_THEN_READS), cpp_package(tmp_path / "guess"), srv=srv)
    assert [row[1] for row in rows(done.stdout)] == ["WA", "WA", "WA"], done.stdout + done.stderr
    assert "claimed 1, the number is 700" in done.stdout


def test_a_kattis_interactive_problem_with_a_python_validator_gets_its_flags(srv, tmp_path):
    problem = "name: Guess\ntype: interactive\nvalidator_flags: queries 10\nlimits: {time_limit: 2}\n"
    package = guessing_package(tmp_path / "guess", problem, {"output_validator/guess.py": GUESS_PY})
    done = kiln_judge(solution(tmp_path, BINARY_SEARCH), package, srv=srv)
    assert done.returncode == 0 and "verdict: AC, 3/3" in done.stdout, done.stdout + done.stderr
    assert "found 700 in" in done.stdout
    wrong = kiln_judge(solution(tmp_path, CLAIMS_ONE), package, srv=srv)
    assert [row[1] for row in rows(wrong.stdout)] == ["WA", "WA", "WA"], wrong.stdout
    assert "claimed 1, the number is 700" in wrong.stdout


def test_a_multi_pass_kattis_problem_is_refused_saying_so(srv, tmp_path):
    problem = "name: Guess\ntype: [interactive, multi-pass]\n"
    package = guessing_package(tmp_path / "guess", problem, {"output_validator/guess.py": GUESS_PY})
    refused = kiln_judge(solution(tmp_path, BINARY_SEARCH), package, srv=srv)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "the Kattis package in" in refused.stderr and "does not judge multi-pass problems" in refused.stderr
