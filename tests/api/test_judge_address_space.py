"""limits.address_space on a real server: RLIMIT_AS on the submission's tests, as DMOJ and
Codeforces count memory, and MLE for a test whose program fails once an allocation was refused
for it (kiln-init's addrspace.c sees the refusal: a seccomp listener on mmap, mremap and brk) or
whose exec the kernel ended because the program's own arrays do not fit. Without it, memory is
resident memory (the cgroup): untouched memory is free, as on Kattis, DOMjudge or Polygon."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kiln.langs import LANGUAGES
from kiln.runtime import workspace_problem
from kilntest import KILN, Server

# a judging language that refuses the limit, where this host has one (the stock VM has python, js
# and cpp: none there, and its row is skipped)
LANGS = Path(__file__).resolve().parents[2] / "langs"
REFUSING = next((slug for slug in ("java", "kotlin", "golang", "csharp", "haskell") if not LANGUAGES[slug].address_space and workspace_problem(LANGS / slug) is None), None)

# 512 MiB asked for, three ints touched: a failed `new` under an address-space limit, nothing
# much under a resident one
# (kept in a volatile: g++ -O2 may leave out an allocation whose address goes nowhere)
NEW_CUBE = "#include <cstdio>\nint (*volatile kept)[512][512];\nint main() { kept = new int[512][512][512]; kept[1][2][3] = 5; std::printf(\"%d\\n\", kept[1][2][3]); }\n"
# 128 MiB of bss, untouched but for one int, read elsewhere than written (else g++ -O2 leaves the
# array out): the kernel maps it at the exec
STATIC_CUBE = "#include <cstdio>\nstatic int a[32][1024][1024];\nint main() { int x = 1; if (std::scanf(\"%d\", &x) != 1) return 2; a[x][x][x] = x; std::printf(\"%d\\n\", a[1][1][1]); }\n"
# n MiB of the heap, every page written: an honest program's memory
HONEST = (
    "#include <cstdio>\n#include <cstring>\n#include <vector>\n"
    "int main() { int n; std::scanf(\"%d\", &n); std::vector<char> v((size_t)n << 20); std::memset(v.data(), 1, v.size());\n"
    "  long s = 0; for (size_t i = 0; i < v.size(); i += 4096) s += v[i]; std::printf(\"%ld\\n\", s); }\n"
)


@pytest.fixture(scope="module")
def server():
    srv = Server({"RUN_LANGS": ",".join(["python", "cpp", *([REFUSING] if REFUSING else [])]), "RUN_CONCURRENCY": "3"}).wait_ready()
    yield srv
    srv.stop()


def judge(srv, solution, tests, lang="cpp", **limits):
    return srv.client.post("/judge", json={"lang_slug": lang, "solution_text": solution, "tests": tests, "limits": limits})


def verdicts(body) -> list[str]:
    return [t["verdict"] for t in body["tests"]]


def test_a_refused_new_is_MLE_under_an_address_space_limit_and_untouched_memory_is_free_without(server):
    limited = judge(server, NEW_CUBE, [{"stdin": "", "expected": "5"}], address_space="64m", memory="256m").json()
    assert verdicts(limited) == ["MLE"], limited
    assert limited["tests"][0]["stats"]["outcome"] == "signaled"  # std::bad_alloc, then abort
    assert "bad_alloc" in limited["tests"][0]["stderr"]
    resident = judge(server, NEW_CUBE, [{"stdin": "", "expected": "5"}], memory="256m").json()
    assert verdicts(resident) == ["AC"], resident  # the pages never touched are never resident


def test_a_static_array_that_does_not_fit_the_address_space_is_MLE_and_fits_resident_memory(server):
    tests = [{"stdin": "1", "expected": "1"}]
    limited = judge(server, STATIC_CUBE, tests, address_space="64m", memory="256m").json()
    assert verdicts(limited) == ["MLE"], limited
    # the kernel ended the exec: the program never ran (SIGSEGV, as a shell's ulimit -v shows)
    assert (limited["tests"][0]["stats"]["outcome"], limited["tests"][0]["stats"]["signal"]) == ("signaled", 11)
    assert verdicts(judge(server, STATIC_CUBE, tests, memory="256m").json()) == ["AC"]


def test_honest_programs_pass_under_an_address_space_limit_test_after_test(server):
    # one request: a kept slot's first test (its standby set aside) and its later ones (each
    # under a test init of its own) alike
    tests = [{"stdin": "10", "expected": str(10 << 8)}, {"stdin": "300", "expected": "0"}, {"stdin": "10", "expected": str(10 << 8)}, {"stdin": "1", "expected": "256"}]
    body = judge(server, HONEST, tests, address_space="256m", memory="512m").json()
    assert verdicts(body) == ["AC", "MLE", "AC", "AC"], body
    assert all(t["stats"]["outcome"] == "exited" for t in body["tests"][::2])


def test_a_program_that_survives_a_refused_allocation_is_judged_by_its_answer(server):
    # it catches std::bad_alloc and answers: the run did not fail, the comparison decides
    solution = "#include <cstdio>\n#include <new>\nchar *volatile kept;\nint main() { try { kept = new char[1 << 30]; std::puts(\"big\"); } catch (const std::bad_alloc &) { std::puts(\"small\"); } }\n"
    body = judge(server, solution, [{"stdin": "", "expected": "small"}, {"stdin": "", "expected": "big"}], address_space="64m").json()
    assert verdicts(body) == ["AC", "WA"], body


def test_python_runs_under_an_address_space_limit_and_a_memory_error_is_MLE(server):
    solution = "import sys\nn = int(sys.stdin.read())\nx = bytearray(n << 20)\nprint(len(x) >> 20)\n"
    body = judge(server, solution, [{"stdin": "8", "expected": "8"}, {"stdin": "200", "expected": "200"}], lang="python", address_space="96m", memory="512m").json()
    assert verdicts(body) == ["AC", "MLE"], body
    assert "MemoryError" in body["tests"][1]["stderr"]


def test_an_interactive_tests_submission_takes_the_limit_and_its_interactor_does_not(server):
    # the interactor holds 150 MiB of address space itself, over the submission's limit
    interactor = "import sys\nn = int(open(sys.argv[1]).read())\nbig = bytearray(150 << 20)\nprint(n, flush=True)\nsys.exit(0 if input() == str(n) else 1)\n"
    solution = "n = int(input())\nx = bytearray(n << 20)\nprint(n, flush=True)\n"
    body = server.client.post("/judge", json={
        "lang_slug": "python", "solution_text": solution, "tests": [{"stdin": "8"}, {"stdin": "200"}],
        "interactor": {"lang_slug": "python", "source": interactor}, "limits": {"address_space": "96m", "memory": "512m"},
    }).json()  # fmt: skip
    assert verdicts(body) == ["AC", "MLE"], body


@pytest.mark.parametrize(
    ("lang", "value", "said"),
    [
        ("cpp", "512k", "limits.address_space must be at least 1m"),
        ("cpp", "lots", "limits.address_space 'lots' is not a size"),
        ("cpp", [64], "limits.address_space must be a size"),
        (REFUSING, "256m", f"limits.address_space: {REFUSING}'s runtime reserves address space it never uses"),
    ],
)
def test_a_bad_address_space_is_a_400_naming_the_field(server, lang, value, said):
    if lang is None:
        pytest.skip("no language that refuses address_space is prepared here (java, kotlin, golang, csharp, haskell)")
    answer = judge(server, "int main() {}", [{"stdin": "", "expected": ""}], lang=lang, address_space=value)
    assert answer.status_code == 400
    assert said in answer.json()["error"]


def test_kiln_judge_takes_an_address_space(server, tmp_path):
    (tmp_path / "main.cpp").write_text(NEW_CUBE)
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "1.in").write_text("")
    (tests / "1.out").write_text("5\n")
    argv = [str(KILN), "judge", str(tmp_path / "main.cpp"), str(tests), "--lang", "cpp", "--url", server.url, "--memory", "256m"]
    limited = subprocess.run([*argv, "--address-space", "64m"], capture_output=True, text=True, timeout=120)
    assert limited.returncode == 1 and "verdict: MLE on test 1" in limited.stdout, limited
    assert subprocess.run(argv, capture_output=True, text=True, timeout=120).returncode == 0
    refused = subprocess.run([*argv, "--address-space", "lots"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "'lots' is not a size" in refused.stderr
