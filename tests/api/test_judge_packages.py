"""`kiln judge` on Kattis and DMOJ packages (kiln/packages/) against a real server: each package is
written here from its format's public documentation, and judged with the verdicts and points its
own judge gives. The Polygon package's tests are in test_judge_cli.py."""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

import pytest

from kilntest import Server
from test_judge_cli import CHECK_CPP, KEY, TESTLIB_H, kiln_judge, rows, solution


@pytest.fixture(scope="module")
def srv():
    server = Server({"RUN_LANGS": "python,cpp", "RUN_API_KEYS": KEY}).wait_ready()
    yield server
    server.stop()


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


# --- Kattis ----------------------------------------------------------------------------------

QUOTIENT = "a, b = map(int, input().split())\nprint(f'{a / b:.2f}')\n"  # two decimals: 1e-4 off on 1/3


def quotient_package(folder: Path, flags: str) -> Path:
    """a / b with answers to 9 decimals; a random b keeps the files new to the store."""
    salt = random.randrange(1, 10**6) * 8  # a multiple of 8: 2/8 is 0.25 exactly
    tests = {"sample/1": (2, 8), "secret/1": (salt * 125_000, 3 * salt), "secret/2": (salt, 3 * salt)}  # 0.25, ~41666.67 (relative), 1/3
    files = {"problem.yaml": f"name: Quotient\nvalidation: default\nvalidator_flags: {flags}\nlimits:\n  memory: 256\n  time_limit: 2\n"}
    for name, (a, b) in tests.items():
        files[f"data/{name}.in"] = f"{a} {b}\n"
        files[f"data/{name}.ans"] = f"{a / b:.9f}\n"
    return write(folder, files)


def test_a_kattis_package_with_default_validation_compares_numbers_within_its_float_tolerance(srv, tmp_path):
    package = quotient_package(tmp_path / "quotient", "float_tolerance 1e-4")
    done = kiln_judge(solution(tmp_path, QUOTIENT), package, srv=srv)
    assert done.returncode == 1, done.stderr
    # 41666.67 against 41666.666666667: 3e-3 off absolutely, 8e-8 relatively (Kattis: either within 1e-4)
    assert [row[:2] for row in rows(done.stdout)] == [["sample/1", "AC"], ["secret/1", "AC"], ["secret/2", "WA"]], done.stdout
    assert "verdict: WA on test secret/2, 2/3 tests passed" in done.stdout
    assert "(a Kattis package)" in done.stderr
    exact = kiln_judge(solution(tmp_path, QUOTIENT.replace(".2f", ".7f")), package, srv=srv)
    assert exact.returncode == 0 and "verdict: AC, 3/3" in exact.stdout, exact.stdout + exact.stderr


def test_a_kattis_absolute_tolerance_alone_allows_no_relative_error(srv, tmp_path):
    package = quotient_package(tmp_path / "quotient", "float_absolute_tolerance 1e-4")
    done = kiln_judge(solution(tmp_path, QUOTIENT), package, srv=srv)
    # 41666.67 is 3e-3 off absolutely: within float_tolerance 1e-4 (relatively), not within this
    assert [row[:2] for row in rows(done.stdout)] == [["sample/1", "AC"], ["secret/1", "WA"], ["secret/2", "WA"]], done.stdout + done.stderr
    exact = kiln_judge(solution(tmp_path, QUOTIENT.replace(".2f", ".7f")), package, srv=srv)
    assert exact.returncode == 0 and "verdict: AC, 3/3" in exact.stdout, exact.stdout + exact.stderr


def test_a_kattis_space_change_sensitive_tolerance_asks_the_answers_whitespace(srv, tmp_path):
    package = quotient_package(tmp_path / "quotient", "space_change_sensitive float_tolerance 1e-4")
    exact = kiln_judge(solution(tmp_path, QUOTIENT.replace(".2f", ".7f")), package, srv=srv)
    assert exact.returncode == 0 and "verdict: AC, 3/3" in exact.stdout, exact.stdout + exact.stderr
    spaced = kiln_judge(solution(tmp_path, QUOTIENT.replace(".2f", ".7f").replace("print(f'", "print(f' ")), package, srv=srv)
    assert [row[1] for row in rows(spaced.stdout)] == ["WA", "WA", "WA"], spaced.stdout + spaced.stderr


# a validate.h of this test's own (Kattis's style: exit 42 accepted, 43 wrong answer, feedback file)
VALIDATE_H = r"""#pragma once
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
static std::ifstream judge_in, judge_ans;
static std::ofstream judge_message;
inline void init_io(int argc, char **argv) {
    if (argc < 4) std::exit(1);
    judge_in.open(argv[1]); judge_ans.open(argv[2]);
    judge_message.open(std::string(argv[3]) + "judgemessage.txt");
}
[[noreturn]] inline void accept() { judge_message << "accepted\n"; judge_message.close(); std::exit(42); }
[[noreturn]] inline void wrong_answer(const std::string &why) { judge_message << why << "\n"; judge_message.close(); std::exit(43); }
"""
# accepts any multiple of the answer's n if the flag says "multiples", else only n itself
VALIDATOR_CPP = r"""#include "validate.h"
int main(int argc, char **argv) {
    init_io(argc, argv);
    bool multiples = argc > 4 && std::string(argv[4]) == "multiples";
    long long n, got;
    judge_ans >> n;
    if (!(std::cin >> got)) wrong_answer("no number in the output");
    if (got == n || (multiples && got != 0 && got % n == 0)) accept();
    wrong_answer("expected a multiple of " + std::to_string(n) + ", got " + std::to_string(got));
}
"""


def multiples_package(folder: Path) -> Path:
    base = random.randrange(10**6) * 10
    files = {
        "problem.yaml": "name: Multiples\ntype: scoring\nvalidation: custom\nvalidator_flags: multiples\nlimits: {memory: 256}\n",
        ".timelimit": "2\n",
        "output_validators/multiples/validate.h": VALIDATE_H,
        "output_validators/multiples/validator.cpp": VALIDATOR_CPP,
        "data/sample/testdata.yaml": "accept_score: 0\n",
        "data/secret/group1/testdata.yaml": "accept_score: 20\ngrader_flags: min\n",
        "data/secret/group2/testdata.yaml": "accept_score: 15\n",
    }
    for name, n in {"sample/1": 1, "secret/group1/a": 2, "secret/group1/b": 5, "secret/group2/a": 3, "secret/group2/b": 4}.items():
        files[f"data/{name}.in"] = f"{base + n}\n"
        files[f"data/{name}.ans"] = f"{base + n}\n"
    return write(folder, files)


def test_a_kattis_custom_output_validator_judges_through_kilns_adapter_with_its_groups_scored(srv, tmp_path):
    package = multiples_package(tmp_path / "multiples")
    # twice n (a multiple: accepted with the flag), but 0 where n ends in 5: group1 fails, all or nothing
    twice = "n = int(input())\nprint(0 if n % 10 == 5 else 2 * n)\n"
    done = kiln_judge(solution(tmp_path, twice), package, srv=srv)
    assert done.returncode == 1, done.stderr
    table = rows(done.stdout)
    assert [row[:2] for row in table] == [["sample/1", "AC"], ["secret/group1/a", "AC"], ["secret/group1/b", "WA"], ["secret/group2/a", "AC"], ["secret/group2/b", "AC"]], done.stdout
    assert "accepted" in done.stdout and "expected a multiple of" in done.stdout  # judgemessage.txt
    assert "score: 30.0/50.0" in done.stdout or "score: 30/50" in done.stdout, done.stdout
    assert "group secret/group1 0" in done.stdout and "group secret/group2 30" in done.stdout


# --- DMOJ ------------------------------------------------------------------------------------

def dmoj_package(folder: Path, checker: str) -> Path:
    """Double n: a sample worth 0, a lone case worth 10, batches of 40 and 50 in an archive."""
    base = random.randrange(10**9) * 10
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "double.zip", "w") as archive:
        for name, n in {"s": 1, "c": 2, "b1.1": 3, "b1.2": 4, "b2.1": 5, "b2.2": 6}.items():
            archive.writestr(f"{name}.in", f"{base + n}\n")
            archive.writestr(f"{name}.out", f"{2 * (base + n)}\n")
    write(folder, {"check.cpp": CHECK_CPP, "testlib.h": TESTLIB_H})
    (folder / "init.yml").write_text(
        f"""archive: double.zip
checker: {checker}
test_cases:
- {{in: s.in, out: s.out, points: 0}}
- {{in: c.in, out: c.out, points: 10}}
- points: 40
  batched:
  - {{in: b1.1.in, out: b1.1.out}}
  - {{in: b1.2.in, out: b1.2.out}}
- points: 50
  batched:
  - {{in: b2.1.in, out: b2.1.out}}
  - {{in: b2.2.in, out: b2.2.out}}
"""
    )
    return folder


WRONG_ON_5 = "n = int(input())\nprint(2 * n if n % 10 != 5 else 0)\n"  # b2.1's n ends in 5


def test_a_dmoj_package_with_a_bridged_testlib_checker_scores_its_cases_and_batches(srv, tmp_path):
    package = dmoj_package(tmp_path / "double", "{name: bridged, args: {files: check.cpp, lang: CPP17, type: testlib}}")
    done = kiln_judge(solution(tmp_path, WRONG_ON_5), package, "--time", "2s", srv=srv)
    assert done.returncode == 1, done.stderr
    verdicts = [row[:2] for row in rows(done.stdout)]
    assert verdicts == [["1", "AC"], ["2", "AC"], ["3.1", "AC"], ["3.2", "AC"], ["4.1", "WA"], ["4.2", "SK"]], done.stdout  # DMOJ short-circuits the rest of a batch
    assert "expected" in done.stdout and "found 0" in done.stdout  # the checker's words
    assert "score: 50/100" in done.stdout or "score: 50.0/100.0" in done.stdout, done.stdout
    assert "(a DMOJ package)" in done.stderr and "--time and --memory" in done.stderr


def test_a_dmoj_standard_checker_compares_tokens_and_an_unknown_one_is_refused(srv, tmp_path):
    package = dmoj_package(tmp_path / "double", "standard")
    done = kiln_judge(solution(tmp_path, "n = int(input())\nprint(' ', 2 * n, '  ')\n"), package, srv=srv)
    assert done.returncode == 0 and "verdict: AC, 6/6" in done.stdout, done.stdout + done.stderr
    assert "score: 100" in done.stdout
    refused = kiln_judge(solution(tmp_path), dmoj_package(tmp_path / "other", "sorted"), srv=srv)
    assert refused.returncode == 2 and "the DMOJ package in" in refused.stderr and "checker 'sorted'" in refused.stderr


# --- judged as the packages' own judges do: DMOJ's line-aware standard checker, Kattis's case, DMOJ's 0-point cases


def pairs_package(folder: Path, points: tuple[int, ...] = (0, 10, 40)) -> Path:
    """n -> "n 2n" on one line: a case worth points[0] (a sample), one worth points[1], a batch of
    two worth points[2]; a random n keeps the files new to the store. checker: standard (DMOJ's default)."""
    base = random.randrange(10**9) * 10
    files = {}
    for name, n in {"s": 1, "c": 2, "b1": 3, "b2": 4}.items():
        files[f"{name}.in"] = f"{base + n}\n"
        files[f"{name}.out"] = f"{base + n} {2 * (base + n)}\n"
    files["init.yml"] = f"""checker: standard
test_cases:
- {{in: s.in, out: s.out, points: {points[0]}}}
- {{in: c.in, out: c.out, points: {points[1]}}}
- points: {points[2]}
  batched:
  - {{in: b1.in, out: b1.out}}
  - {{in: b2.in, out: b2.out}}
"""
    folder.mkdir(parents=True)
    return write(folder, files)


def test_a_dmoj_floats_checker_is_line_aware_as_dmojs(srv, tmp_path):
    package = pairs_package(tmp_path / "pairs", points=(1, 10, 40))
    init = package / "init.yml"
    init.write_text(init.read_text().replace("checker: standard", "checker: {name: floats, args: {precision: 4, error_mode: absolute}}"))
    close = "n = int(input())\nprint(n + 0.00004, 2 * n - 0.00009, end='\\r\\n\\n')\n"  # within 1e-4, CRLF and an empty line
    done = kiln_judge(solution(tmp_path, close), package, srv=srv)
    assert done.returncode == 0 and "verdict: AC, 4/4" in done.stdout, done.stdout + done.stderr
    # the same numbers on two lines: DMOJ's floats asks the answer's lines
    broken = kiln_judge(solution(tmp_path, "n = int(input())\nprint(n)\nprint(2 * n)\n"), package, srv=srv)
    assert [row[1] for row in rows(broken.stdout)] == ["WA", "WA", "WA", "SK"], broken.stdout + broken.stderr


def test_a_dmoj_standard_checker_is_line_aware_as_dmojs(srv, tmp_path):
    package = pairs_package(tmp_path / "pairs", points=(1, 10, 40))
    # DMOJ's standard checker: CRLF, trailing spaces, runs of spaces and blank lines do not count...
    loose = "n = int(input())\nprint(' ', n, '  ', 2 * n, ' ', end='\\r\\n\\n\\n')\n"
    done = kiln_judge(solution(tmp_path, loose), package, srv=srv)
    assert done.returncode == 0 and "verdict: AC, 4/4" in done.stdout, done.stdout + done.stderr
    # ...but a line break where the answer has a space does: WA on every case (tokens alone would accept it)
    broken = kiln_judge(solution(tmp_path, "n = int(input())\nprint(n)\nprint(2 * n)\n"), package, srv=srv)
    assert broken.returncode == 1, broken.stderr
    assert [row[1] for row in rows(broken.stdout)] == ["WA", "WA", "WA", "SK"], broken.stdout
    assert "score: 0/51" in broken.stdout, broken.stdout


def test_a_dmoj_zero_point_case_that_fails_skips_every_case_after_it_as_dmoj_short_circuits(srv, tmp_path):
    package = pairs_package(tmp_path / "pairs")
    right = "n = int(input())\nprint(n, 2 * n)\n"
    wrong_on_sample = "n = int(input())\nprint(0 if n % 10 == 1 else n, 2 * n)\n"  # s's n ends in 1
    done = kiln_judge(solution(tmp_path, wrong_on_sample), package, srv=srv)
    assert done.returncode == 1, done.stderr
    assert [row[:2] for row in rows(done.stdout)] == [["1", "WA"], ["2", "SK"], ["3.1", "SK"], ["3.2", "SK"]], done.stdout
    assert "score: 0/50" in done.stdout and "verdict: WA on test 1" in done.stdout, done.stdout
    assert "0-point" not in done.stderr  # no note: kiln skips as DMOJ does
    passed = kiln_judge(solution(tmp_path, right), package, srv=srv)
    assert passed.returncode == 0 and "score: 50/50" in passed.stdout, passed.stdout + passed.stderr


def test_a_kattis_package_compares_words_ignoring_case_as_its_default_validator(srv, tmp_path):
    salt = random.randrange(10**9)
    files = {"problem.yaml": "name: Parity\nvalidation: default\nlimits: {time_limit: 2}\n"}
    for name, n in {"sample/1": 2 * salt, "secret/1": 2 * salt + 1}.items():
        files[f"data/{name}.in"] = f"{n}\n"
        files[f"data/{name}.ans"] = f"{'Even' if n % 2 == 0 else 'Odd'} {n}\n"
    package = write(tmp_path / "parity", files)
    shouting = "n = int(input())\nprint('EVEN' if n % 2 == 0 else 'odd', n)\n"
    done = kiln_judge(solution(tmp_path, shouting), package, srv=srv)
    assert done.returncode == 0 and "verdict: AC, 2/2" in done.stdout, done.stdout + done.stderr
    # with case_sensitive in validator_flags, case counts again
    (package / "problem.yaml").write_text("name: Parity\nvalidation: default\nvalidator_flags: case_sensitive\nlimits: {time_limit: 2}\n")
    strict = kiln_judge(solution(tmp_path, shouting), package, srv=srv)
    assert strict.returncode == 1 and [row[1] for row in rows(strict.stdout)] == ["WA", "WA"], strict.stdout + strict.stderr


def test_a_dmoj_identical_checker_compares_with_the_answer_as_dmoj_reads_it(srv, tmp_path):
    """DMOJ gives an answer file without a final newline one, and turns CRLF into LF, before
    `identical` compares bytes: print's "n\\n" is AC on an answer saved as "n" with no newline."""
    n = random.randrange(10**9)
    folder = tmp_path / "echo"
    folder.mkdir()
    (folder / "a.in").write_bytes(b"%d\r\n" % n)
    (folder / "a.out").write_bytes(b"%d" % n)
    (folder / "init.yml").write_text("checker: identical\ntest_cases: [{in: a.in, out: a.out, points: 5}]\n")
    done = kiln_judge(solution(tmp_path, "import sys\nsys.stdout.write(sys.stdin.read())\n"), folder, srv=srv)
    assert done.returncode == 0 and "score: 5/5" in done.stdout, done.stdout + done.stderr


def pretests_package(folder: Path) -> Path:
    """n -> 2n: two pretests worth 5 each, then test cases worth 0, 10 and 40 (DMOJ's init.yml
    with pretest_test_cases); n ends in 1, 2, 3 in s, c, b (a random n keeps the files new)."""
    base = random.randrange(10**9) * 10
    files = {}
    for name, n in {"s": 1, "c": 2, "b": 3}.items():
        files[f"{name}.in"] = f"{base + n}\n"
        files[f"{name}.out"] = f"{2 * (base + n)}\n"
    files["init.yml"] = """pretest_test_cases:
- {in: s.in, out: s.out, points: 5}
- {in: c.in, out: c.out, points: 5}
test_cases:
- {in: s.in, out: s.out, points: 0}
- {in: c.in, out: c.out, points: 10}
- {in: b.in, out: b.out, points: 40}
"""
    folder.mkdir(parents=True)
    return write(folder, files)


def test_a_dmoj_package_with_pretests_judges_them_first_and_alone_with_pretests(srv, tmp_path):
    package = pretests_package(tmp_path / "double")
    wrong_on_b = solution(tmp_path, "n = int(input())\nprint(0 if n % 10 == 3 else 2 * n)\n")
    full = kiln_judge(wrong_on_b, package, srv=srv)
    assert full.returncode == 1, full.stderr
    # DMOJ's full judging: the pretests first at 0 points, then the test cases
    assert [row[:2] for row in rows(full.stdout)] == [["p1", "AC"], ["p2", "AC"], ["1", "AC"], ["2", "AC"], ["3", "WA"]], full.stdout
    assert "score: 10/50" in full.stdout, full.stdout
    pretests = kiln_judge(wrong_on_b, package, "--pretests", srv=srv)
    assert pretests.returncode == 0 and [row[:2] for row in rows(pretests.stdout)] == [["p1", "AC"], ["p2", "AC"]], pretests.stdout
    assert "score: 10/10" in pretests.stdout, pretests.stdout
    # a failed pretest short-circuits every case after it in the full judging
    wrong_on_c = solution(tmp_path, "n = int(input())\nprint(0 if n % 10 == 2 else 2 * n)\n")
    failed = kiln_judge(wrong_on_c, package, srv=srv)
    assert [row[1] for row in rows(failed.stdout)] == ["AC", "WA", "SK", "SK", "SK"] and "score: 0/50" in failed.stdout, failed.stdout
    only = kiln_judge(wrong_on_c, package, "--pretests", srv=srv)
    assert [row[1] for row in rows(only.stdout)] == ["AC", "WA"] and "score: 5/10" in only.stdout, only.stdout


def test_pretests_of_a_package_format_without_them_is_a_usage_error(srv, tmp_path):
    package = quotient_package(tmp_path / "quotient", "float_tolerance 1e-4")
    refused = kiln_judge(solution(tmp_path, QUOTIENT), package, "--pretests", srv=srv)
    assert refused.returncode == 2 and "a Kattis package, which has no pretests" in refused.stderr, refused.stderr
