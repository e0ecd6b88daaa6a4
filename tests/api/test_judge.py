"""POST /judge against a real server: build once, every test in a fresh sandbox with its own
limits, verdicts in DESIGN.md's order, the build cache, the file store's inputs, the 400s that
name the field. Python and C++ (a compiled language whose build leaves a binary); every other
language's build and exec targets: tests/langs/test_judge_languages.py."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import socket
import threading
import time

import pytest

from kiln import kernel
from kilntest import Server, alive, flow_label_claims, wait_until

AB = "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"
AB_CPP = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }\n"


@pytest.fixture(scope="module")
def server():
    srv = Server({"RUN_LANGS": "python,cpp", "RUN_CONCURRENCY": "4", "RUN_JUDGE_TESTS_MAX": "20"}).wait_ready()
    yield srv
    srv.stop()


def judge(srv, solution=AB, tests=None, lang="python", **fields):
    tests = tests if tests is not None else [{"stdin": "1 2\n", "expected": "3\n"}]
    return srv.client.post("/judge", json={"lang_slug": lang, "solution_text": solution, "tests": tests, **fields})


def verdicts(body) -> list[str]:
    return [t["verdict"] for t in body["tests"]]


# --- the answer --------------------------------------------------------------------------------


def test_a_submission_is_built_once_and_judged_on_every_test_in_order(server):
    answer = judge(server, tests=[{"stdin": "1 2\n", "expected": "3"}, {"stdin": "5 5\n", "expected": "11"}, {"stdin": "x\n", "expected": "1"}, {"stdin": "2 2", "expected": "4"}])
    assert answer.status_code == 200
    body = answer.json()
    assert list(body) == ["verdict", "passed", "total", "compile", "tests", "stats"]
    assert (body["verdict"], body["passed"], body["total"]) == ("WA", 2, 4)
    assert verdicts(body) == ["AC", "WA", "RE", "AC"]
    assert list(body["compile"]) == ["exit_code", "stdout", "stderr", "cached", "stats"]
    first = body["tests"][0]
    assert list(first) == ["verdict", "exit_code", "stdout", "stderr", "checker_message", "stats"]
    assert (first["exit_code"], first["stdout"], first["checker_message"]) == (0, "3\n", None)
    assert list(first["stats"]) == ["outcome", "wall_ms", "cpu_ms", "memory_peak_bytes", "signal"]
    assert "ValueError" in body["tests"][2]["stderr"] and body["tests"][2]["exit_code"] == 1
    assert body["stats"]["wall_ms"] >= body["compile"]["stats"]["wall_ms"]


def test_a_compiled_language_builds_a_binary_once_and_the_cache_answers_the_second_time(server):
    tests = [{"stdin": f"{i} {i}\n", "expected": str(2 * i)} for i in range(5)]
    first = judge(server, AB_CPP, tests, lang="cpp").json()
    assert (first["verdict"], first["passed"], first["compile"]["cached"]) == ("AC", 5, False)
    assert first["compile"]["stats"]["cpu_ms"] > 100  # g++ ran
    again = judge(server, AB_CPP, tests, lang="cpp").json()
    assert (again["verdict"], again["compile"]["cached"]) == ("AC", True)
    assert again["compile"]["stats"] == first["compile"]["stats"]  # the first build's answer
    other = judge(server, AB_CPP + "// another file\n", tests[:1], lang="cpp").json()
    assert other["compile"]["cached"] is False


def test_a_compile_error_is_CE_with_the_compilers_words_and_no_test_runs(server):
    body = judge(server, "int main( {", [{"stdin": "", "expected": ""}] * 2, lang="cpp").json()
    assert body["verdict"] == "CE" and body["passed"] == 0 and body["compile"]["exit_code"] != 0
    assert "error" in body["compile"]["stderr"] + body["compile"]["stdout"]
    assert body["tests"] == [{"verdict": "SK", "exit_code": None, "stdout": "", "stderr": "", "checker_message": None, "stats": None}] * 2
    syntax = judge(server, "print(1\n").json()
    assert syntax["verdict"] == "CE" and "SyntaxError" in syntax["compile"]["stderr"] + syntax["compile"]["stdout"]


def test_extra_files_are_built_with_the_judge_file(server):
    solution = '#include "add.h"\n#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << add(a, b) << "\\n"; }\n'
    files = {"add.h": "long add(long a, long b);\n", "add.cpp": '#include "add.h"\nlong add(long a, long b) { return a + b; }\n'}
    assert judge(server, solution, lang="cpp", files=files).json()["verdict"] == "AC"
    python = judge(server, "from helper import add\nprint(add(*map(int, input().split())))\n", files={"helper.py": "def add(a, b):\n    return a + b\n"})
    assert python.json()["verdict"] == "AC"


# --- the verdicts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("solution", "limits", "verdict", "outcome"),
    [
        ("while True: pass\n", {"time": "300ms"}, "TLE", "timed_out"),  # CPU time, stopped at it
        ("import time\ntime.sleep(30)\n", {"time": "300ms", "wall_time": "600ms"}, "TLE", "timed_out"),  # wall time
        ("x = bytearray(200 << 20)\nprint(len(x))\n", {"memory": "64m"}, "MLE", "out_of_memory"),
        ("import sys\nwhile True: sys.stdout.write('x' * 1000)\n", {"output": "10k"}, "OLE", "signaled"),  # killed: /run's outcome
        ("import ctypes\nctypes.CDLL(None).unshare(0x10000000)\n", {}, "SV", "policy_violation"),  # CLONE_NEWUSER
        ("import os\nos.kill(os.getpid(), 11)\n", {}, "RE", "signaled"),
        ("raise SystemExit(3)\n", {}, "RE", "exited"),
        ("raise SystemExit(159)\n", {}, "RE", "exited"),  # 128 + SIGSYS, but said by the program itself
    ],
)
def test_each_verdict_of_a_run(server, solution, limits, verdict, outcome):
    body = judge(server, solution, [{"stdin": "", "expected": "anything"}], limits=limits).json()
    [test] = body["tests"]
    assert (body["verdict"], test["verdict"], test["stats"]["outcome"]) == (verdict, verdict, outcome), test
    if verdict == "TLE":
        assert test["exit_code"] is None
        assert test["stats"]["wall_ms"] < 5000  # stopped at its limit, not at a default
    if verdict == "OLE":
        assert len(test["stdout"].encode()) <= 4096


CPP = "#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n#include <vector>\n#include <unistd.h>\nint main() {\n%s\n}\n"


@pytest.mark.parametrize(
    ("body", "limits", "verdict", "outcome"),
    [
        ("volatile long x = 0; for (;;) x++;", {"time": "300ms"}, "TLE", "timed_out"),
        ("sleep(30);", {"time": "300ms", "wall_time": "600ms"}, "TLE", "timed_out"),
        ("std::vector<char> v(200 << 20); memset(v.data(), 1, v.size()); printf(\"%d\", v[7]);", {"memory": "64m"}, "MLE", "out_of_memory"),
        ("for (;;) putchar('x');", {"output": "10k"}, "OLE", "signaled"),
        ("int *p = nullptr; *p = 1;", {}, "RE", "signaled"),
        ("return 3;", {}, "RE", "exited"),
        ("for (int i = 0; i < 64; i++) if (fork() < 0) return 1; return 0;", {"pids": 8}, "RE", "pids_limit"),
        ("printf(\"%d\\n\", 3);", {}, "AC", "exited"),
    ],
)
def test_each_verdict_of_a_compiled_program(server, body, limits, verdict, outcome):
    answer = judge(server, CPP % body, [{"stdin": "", "expected": "3"}], lang="cpp", limits=limits).json()
    [test] = answer["tests"]
    assert (test["verdict"], test["stats"]["outcome"]) == (verdict, outcome), test


def test_cpu_time_is_the_whole_tests_every_process(server):
    spin = "import os\nfor _ in range(2):\n    if os.fork() == 0:\n        break\nwhile True: pass\n"
    [test] = judge(server, spin, [{"stdin": "", "expected": ""}], limits={"time": "400ms", "wall_time": "5s"}).json()["tests"]
    assert test["verdict"] == "TLE"
    assert test["stats"]["wall_ms"] < 2000  # three spinners on two cores reach 400 ms of CPU well before


def test_stderr_past_the_output_limit_is_cut_without_a_verdict(server):
    solution = "import sys\nsys.stderr.write('e' * 100000)\nprint(3)\n"
    [test] = judge(server, solution, limits={"output": "10k"}).json()["tests"]
    assert test["verdict"] == "AC" and test["stderr"] == "e" * 4096


def test_stop_on_failure_skips_the_tests_after_the_first_failure(server):
    tests = [{"stdin": "1 1", "expected": "2"}, {"stdin": "1 1", "expected": "3"}] + [{"stdin": "1 1", "expected": "2"}] * 6
    body = judge(server, tests=tests, stop_on_failure=True).json()
    assert body["verdict"] == "WA" and verdicts(body)[:2] == ["AC", "WA"]
    assert "SK" in verdicts(body)[2:]  # some may have started before the failure was known
    assert all(v in ("AC", "SK") for v in verdicts(body)[2:])
    skipped = body["tests"][-1]
    assert skipped == {"verdict": "SK", "exit_code": None, "stdout": "", "stderr": "", "checker_message": None, "stats": None}
    assert verdicts(judge(server, tests=tests).json()) == ["AC", "WA"] + ["AC"] * 6


@pytest.mark.parametrize(
    ("mode", "output", "expected", "same"),
    [
        ("tokens", "1  2\n3", "1 2 3\n\n", True),
        ("tokens", "1 2", "1 2 3", False),
        ("lines", "a b  \r\nc\n\n\n", "a b\nc", True),
        ("lines", "a  b\n", "a b\n", False),
        ("exact", "3\n", "3\n", True),
        ("exact", "3\n", "3", False),
        ("float", "0.3333334 x", "0.333333 x", True),
        ("float", "0.34", "0.333333", False),
        ("none", "whatever", None, True),
    ],
)
def test_compare_modes(server, mode, output, expected, same):
    test = {"stdin": output, **({"expected": expected} if expected is not None else {})}
    solution = "import sys\nsys.stdout.write(sys.stdin.read())\n"
    body = judge(server, solution, [test], compare=mode, **({"epsilon": 1e-6} if mode == "float" else {})).json()
    assert body["verdict"] == ("AC" if same else "WA")


@pytest.mark.parametrize(
    ("mode", "output", "expected", "same"),
    [
        ("line_tokens", "1  2 \r\n\n3\n", "1 2\n3\n", True),  # DMOJ's standard checker
        ("line_tokens", "1\n2\n3\n", "1 2\n3\n", False),  # a line break where a space is expected
        ("tokens", "YES\nno\n", "yes no\n", True),  # Kattis's default validator, case-insensitive
        ("line_tokens", "Yes\nNo\n", "yes no\n", False),
        ("exact", "Hello\n", "hello\n", True),
    ],
)
@pytest.mark.parametrize("size", ["small", "large"])  # large: compared in the worker thread, the answer from the store
def test_compare_modes_of_the_package_judges_and_ignore_case(server, mode, output, expected, same, size):
    if size == "large":  # repeated well past COMPARE_INLINE_MAX (16 KiB): the worker's path, paced
        output, expected = output * 5000, expected * 5000
    posted = server.client.post("/files", content=expected.encode())
    assert posted.status_code in (200, 201)
    test = {"stdin": output, "expected_file": posted.json()["id"]} if size == "large" else {"stdin": output, "expected": expected}
    solution = "import sys\nsys.stdout.write(sys.stdin.read())\n"
    body = judge(server, solution, [test], compare=mode, ignore_case=mode in ("tokens", "exact")).json()
    assert body["verdict"] == ("AC" if same else "WA"), body
    if mode in ("tokens", "exact"):  # and without ignore_case, case counts
        assert judge(server, solution, [test], compare=mode).json()["verdict"] == "WA"


@pytest.mark.parametrize(
    ("mode", "fields", "output", "expected", "same"),
    [
        # DMOJ's floats: numbers within 1e-4 on the same lines (float alone would accept the second)
        ("line_floats", {"epsilon": 1e-4, "float_rule": "dmoj"}, "1 0.33333\r\n\n2\n", "1 0.333333333\n2\n", True),
        ("line_floats", {"epsilon": 1e-4, "float_rule": "dmoj"}, "1\n0.33333\n2\n", "1 0.333333333\n2\n", False),
        # Kattis's space_change_sensitive float_tolerance 0.5: the whitespace as the answer's
        ("exact_floats", {"epsilon": 0.5, "float_rule": "kattis"}, "PI is 3.4\n", "PI is 3.14\n", True),
        ("exact_floats", {"epsilon": 0.5, "float_rule": "kattis"}, "PI  is 3.14\n", "PI is 3.14\n", False),
        # Kattis's float_absolute_tolerance alone, in doubles: 0.300001 is 1.0000000000287557e-06 off 0.3
        ("float", {"absolute_epsilon": 1e-6, "float_rule": "kattis"}, "0.300001\n", "0.3\n", False),
        ("float", {"absolute_epsilon": 1e-6}, "0.300001\n", "0.3\n", True),  # kiln's decimal: as written
        ("float", {"relative_epsilon": 0.1, "float_rule": "kattis"}, "105 0\n", "100 0\n", True),
        ("float", {"relative_epsilon": 0.1, "float_rule": "kattis"}, "105 0.01\n", "100 0\n", False),  # relative to 0: only 0
    ],
)
@pytest.mark.parametrize("size", ["small", "large"])
def test_the_float_modes_of_dmoj_and_kattis_with_their_tolerances_and_rules(server, mode, fields, output, expected, same, size):
    if size == "large":  # well past COMPARE_INLINE_MAX: the worker thread's path, the answer from the store
        output, expected = output * 3000, expected * 3000
    posted = server.client.post("/files", content=expected.encode())
    test = {"stdin": output, "expected_file": posted.json()["id"]} if size == "large" else {"stdin": output, "expected": expected}
    solution = "import sys\nsys.stdout.write(sys.stdin.read())\n"
    body = judge(server, solution, [test], compare=mode, **fields).json()
    assert body["verdict"] == ("AC" if same else "WA"), body


def test_a_tolerance_that_does_not_fit_is_a_400_naming_the_field(server):
    both = judge(server, compare="float", epsilon=1e-6, relative_epsilon=1e-6)
    assert both.status_code == 400 and both.json()["error"].startswith("epsilon sets both absolute_epsilon and relative_epsilon")
    dmoj = judge(server, compare="line_floats", float_rule="dmoj", absolute_epsilon=0.1, relative_epsilon=0.2)
    assert dmoj.status_code == 400 and dmoj.json()["error"].startswith("float_rule dmoj takes")


@pytest.mark.parametrize("epsilon", ["1e400", str(10**400)])
def test_an_epsilon_beyond_a_double_is_a_number_like_any_other(server, epsilon):
    solution = "print(5)\n"
    raw = '{"lang_slug": "python", "solution_text": %s, "tests": [{"expected": "1"}], "compare": "float", "epsilon": %s}' % (json.dumps(solution), epsilon)
    answer = server.client.post("/judge", content=raw)
    assert answer.status_code == 200 and answer.json()["verdict"] == "AC", answer.text


# --- what a test sees ------------------------------------------------------------------------------


def test_a_tests_stdin_is_a_seekable_file(server):
    solution = "import sys, os\ndata = sys.stdin.read()\nsys.stdin.seek(0)\nprint(os.path.isfile('/proc/self/fd/0') or 'file', data == sys.stdin.read())\n"
    [test] = judge(server, solution, [{"stdin": "1 2\n", "expected": "True True"}]).json()["tests"]
    assert test["verdict"] == "AC", test


def test_a_new_build_that_finds_the_cache_full_of_builds_in_use_is_refused_with_a_reason_never_ie(start_server):
    """The cache holds about one python build: while a request holds its cached build, another
    request's new build finds no room. It was cached and evicted at once, and every test of that
    request was IE; it is a 503 that says why, and once the first is done it is built and judged."""
    # a build is its source (8 KiB: what counts) and its bytecode and folders (about 2 KiB)
    padding = "#" * 8192 + "\n"
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="4", RUN_BUILD_CACHE_MAX="15k")
    slow = padding + "import time\ntime.sleep(3)\n" + AB
    tests = [{"stdin": f"{i} 1\n", "expected": str(i + 1)} for i in range(3)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        holding = pool.submit(judge, srv, slow, limits={"time": "10s"})
        # its test has run a second (a slot's title says so): its build is cached and in use
        assert wait_until(lambda: any((slot.age_s or 0) >= 1 for slot in srv.busy_slots()), timeout=30)
        refused = judge(srv, padding + AB, tests)
        first = holding.result().json()
    assert first["verdict"] == "AC", first
    assert refused.status_code == 503 and "no room for a build" in refused.json()["error"], refused.text
    assert refused.headers["Retry-After"]
    later = judge(srv, padding + AB, tests).json()
    assert (later["verdict"], later["compile"]["cached"]) == ("AC", False), later


def test_identical_submissions_sent_at_once_are_built_once(server):
    # as many as are judged at once (RUN_JUDGE_MAX, 2 here): more wait for admission, and on a
    # slow machine (the emulated VM's C++ build) past RUN_QUEUE_WAIT, a 429
    source = f"# {time.time_ns()}\n" + AB_CPP  # new to the cache
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: judge(server, source, lang="cpp").json(), range(2)))
    assert [a.get("verdict") for a in answers] == ["AC"] * 2, answers
    assert sorted(a["compile"]["cached"] for a in answers) == [False, True]


def test_tests_run_fresh_a_test_sees_neither_another_tests_files_nor_a_changed_build(server):
    # each test writes in its cwd and /tmp and replaces a file of the build (its judge dir is its
    # own to change, in its own copy); every test must find the build as it was and no other's
    # files (the first runs in the slot's warm mount namespace, the others in copies of it)
    solution = (
        "import os, sys\n"
        "seen = sorted(f for d in ('.', '/tmp') for f in os.listdir(d) if f.startswith('mark'))\n"
        "print(seen, open('judge/helper.txt').read())\n"
        "n = sys.stdin.read().strip()\n"
        "for d in ('.', '/tmp'):\n"
        "    open(d + '/mark-' + n, 'w').write('x')\n"
        "os.remove('judge/helper.txt')\n"
        "open('judge/helper.txt', 'w').write('changed')\n"
    )
    tests = [{"stdin": str(i), "expected": "[] original"} for i in range(4)]
    body = judge(server, solution, tests, files={"helper.txt": "original"}).json()
    assert verdicts(body) == ["AC"] * 4, body


def test_a_test_runs_as_the_slots_user_on_a_read_only_build(server):
    solution = (
        "import os\nst = os.stat('judge/main.py')\n"
        "try:\n    open('judge/main.py', 'a').write('#')\n    wrote = True\nexcept PermissionError:\n    wrote = False\n"
        "print(os.getuid() >= 10001, st.st_uid != os.getuid(), os.access('.', os.W_OK), wrote)\n"
    )
    [test] = judge(server, solution, [{"stdin": "", "expected": "True True True False"}]).json()["tests"]
    assert test["verdict"] == "AC", test
    # the builds' host folder (/run/<instance>/layers) is nowhere in the task's mount table
    mounts = "print(any('/run' in line or 'layers /' in line for line in open('/proc/self/mountinfo')))"
    [test] = judge(server, mounts, [{"stdin": "", "expected": "False"}]).json()["tests"]
    assert test["verdict"] == "AC", test


def test_the_file_stores_files_are_a_tests_input_and_answer(server):
    data = b"40 2\n"
    stdin_id = server.client.post("/files", content=data).json()["id"]
    answer_id = server.client.post("/files", content=b"42\n").json()["id"]
    assert stdin_id == "sha256:" + hashlib.sha256(data).hexdigest()
    body = judge(server, tests=[{"stdin_file": stdin_id, "expected_file": answer_id}, {"stdin_file": stdin_id, "expected": "42"}]).json()
    assert verdicts(body) == ["AC", "AC"]
    missing = "sha256:" + "0" * 64
    refused = judge(server, tests=[{"stdin_file": missing, "expected": "1"}])
    assert refused.status_code == 400 and refused.json() == {"error": f"unknown file {missing}"}


# --- checkers ----------------------------------------------------------------------------------------

CHECKER = (
    "import sys, os\n"
    "given, output, answer = (open(path).read() for path in sys.argv[1:4])\n"
    "a, b = map(int, given.split()[:2])\n"
    "words = output.split()\n"
    "if not words:\n    print('no answer'); sys.exit(2)\n"
    "if words[0] == 'crash':\n    sys.exit(7)\n"
    "if words[0] == 'fail':\n    print('checker failed'); sys.exit(3)\n"
    "print('expected', a + b, 'got', words[0], 'answer file', repr(answer), sorted(os.listdir('judge')))\n"
    "sys.exit(0 if int(words[0]) == a + b else 1)\n"
)
ECHO = "import sys\nprint(sys.stdin.read().split()[2])\n"  # prints its input's third word


def test_a_checker_gives_each_verdict_in_testlibs_convention_with_its_message(server):
    tests = [{"stdin": "1 2 3"}, {"stdin": "1 2 4"}, {"stdin": "1 2 ", "expected": "x"}, {"stdin": "1 2 crash"}, {"stdin": "1 2 fail"}]
    body = judge(server, ECHO, tests, compare="checker", checker={"lang_slug": "python", "source": CHECKER}).json()
    assert verdicts(body) == ["AC", "WA", "RE", "IE", "IE"], body
    ok, wrong, _, crashed, failed = body["tests"]
    assert failed["checker_message"] == "checker failed\n"
    # its own sandbox: its three files and its own source, nothing of the submission's
    assert ok["checker_message"] == "expected 3 got 3 answer file '' ['__pycache__', 'answer', 'input', 'main.py', 'output']\n"
    assert wrong["checker_message"].startswith("expected 3 got 4")
    assert crashed["checker_message"] == "" and body["verdict"] == "WA"
    empty = judge(server, "print()\n", [{"stdin": "1 2", "expected": "3"}], compare="checker", checker={"lang_slug": "python", "source": CHECKER}).json()
    assert (empty["tests"][0]["verdict"], empty["tests"][0]["checker_message"]) == ("PE", "no answer\n")


def test_a_compiled_checker_gets_its_arguments_and_is_built_once(server):
    checker = (
        "#include <fstream>\n#include <iostream>\nint main(int argc, char **argv) {\n"
        "  if (argc != 4) { std::cout << \"argc \" << argc; return 3; }\n"
        "  std::ifstream in(argv[1]), out(argv[2]), ans(argv[3]); long a, b, got = 0, want = 0;\n"
        "  in >> a >> b; out >> got; ans >> want; std::cout << argv[1] << ' ' << got;\n"
        "  return got == a + b && want == a + b ? 0 : 1;\n}\n"
    )
    tests = [{"stdin": "1 2", "expected": "3"}, {"stdin": "2 2", "expected": "4"}]
    body = judge(server, AB, tests, compare="checker", checker={"lang_slug": "cpp", "source": checker}).json()
    assert verdicts(body) == ["AC", "AC"], body
    assert body["tests"][0]["checker_message"] == "judge/input 3"


def test_a_checker_runs_in_its_tests_slot_with_its_own_limits_and_the_tests_come_back(server):
    # the checker needs more memory than the tests may have (150 MiB within python's own limit,
    # the tests 64m): the slot's limits go up for each check and down again for the next test.
    # Time enough that memory is what ends the bombs on a slow machine too (an emulated one
    # counts a python's start and 64 MiB written at over the default second of CPU)
    solution = "import sys\nx = bytearray(int(sys.stdin.read()) << 20)\nprint(3)\n"
    checker = "import sys\nx = bytearray(150 << 20)\nsys.exit(0 if open(sys.argv[2]).read().split() == ['3'] else 1)\n"
    order = [1, 1, 300, 1, 1, 300, 1, 1]
    before = warmups(server)
    body = judge(server, solution, [{"stdin": str(n)} for n in order], compare="checker", checker={"lang_slug": "python", "source": checker}, limits={"memory": "64m", "time": "5s"}).json()
    assert verdicts(body) == ["AC", "AC", "MLE", "AC", "AC", "MLE", "AC", "AC"], body
    assert not kept_slots(server) or warmups(server) - before < len(order), "a test and its check took a fresh slot each"


def test_a_checker_has_its_own_cpu_time_whatever_the_time_limit_of_the_test_before_it(server):
    # the tests' time limit gives them an RLIMIT_CPU of 2 s; each check takes 2.5 s of CPU,
    # within a checker's own limits: a kept slot's checks were killed at the test's 2 s (IE)
    # when init set the rlimits on itself and could not raise them again
    checker = (
        "import sys, time\nstart = time.process_time()\nwhile time.process_time() - start < 2.5: pass\n"
        "sys.exit(0 if open(sys.argv[2]).read().split() == ['3'] else 1)\n"
    )
    tests = [{"stdin": "1 2\n"}] * 3
    body = judge(server, AB, tests, compare="checker", checker={"lang_slug": "python", "source": checker}, limits={"time": "500ms"}).json()
    assert verdicts(body) == ["AC"] * 3, body


def test_a_tests_memory_peak_counts_nothing_of_what_the_check_before_it_left_in_tmp(server):
    # each check leaves 180 MB in its /tmp: charged to the slot's cgroup until its sandbox is
    # gone, and an honest a*2 under 128m was MLE when the peak was set back before that
    checker = (
        "import sys\n"
        "for i in range(6):\n    open(f'/tmp/fill{i}', 'wb').write(b'x' * (30 << 20))\n"  # files of 64 MiB at most
        "sys.exit(0 if open(sys.argv[2]).read().split() == [str(2 * int(open(sys.argv[1]).read()))] else 1)\n"
    )
    tests = [{"stdin": str(n)} for n in range(15)]
    body = judge(server, "print(2 * int(input()))\n", tests, compare="checker", checker={"lang_slug": "python", "source": checker}, limits={"memory": "128m"}).json()
    assert verdicts(body) == ["AC"] * 15, body
    assert max(t["stats"]["memory_peak_bytes"] for t in body["tests"]) < 64 << 20, [t["stats"] for t in body["tests"]]


def test_a_checker_that_does_not_build_is_a_400_with_the_compilers_words(server):
    answer = judge(server, AB, [{"stdin": "1 2"}], compare="checker", checker={"lang_slug": "cpp", "source": "int main( {"})
    assert answer.status_code == 400
    assert answer.json()["error"] == "checker does not build" and "error" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"compare": "checker"}, "checker is required when compare is checker"),
        ({"checker": {"lang_slug": "python", "source": "pass"}}, "checker is given: compare must be checker (got tokens)"),
        ({"compare": "checker", "checker": {"lang_slug": "cobol", "source": ""}}, "checker.lang_slug: unsupported lang_slug"),
        ({"compare": "checker", "checker": {"lang_slug": "python"}}, "checker.source is required"),
        ({"compare": "checker", "checker": "python"}, 'checker must be an object {"lang_slug": ..., "source": ...}'),
    ],
)
def test_a_bad_checker_is_a_400_that_names_the_field(server, fields, error):
    answer = judge(server, AB, [{"stdin": "1 2", "expected": "3"}], **fields)
    assert answer.status_code == 400 and answer.json()["error"] == error


# --- files of a checker or an interactor, and stored files in every `files` ----------------------

# a stand-in for testlib.h (never in the project): a header the checker's #include must find
CHECKERLIB = "#pragma once\n#include <fstream>\ninline long read_long(const char *path) { std::ifstream in(path); long x = 0; in >> x; return x; }\n#define SAYS \"%s\"\n"
LIB_CHECKER = (
    '#include "checkerlib.h"\n#include <cstdio>\n'
    "int main(int argc, char **argv) {\n"
    "  long a = read_long(argv[1]), got = read_long(argv[2]);\n"
    "  std::printf(SAYS, got == 3 ? \"ok\" : \"no\");\n"
    "  return got == 3 ? 0 : 1;\n}\n"
)


def checker_with(files) -> dict:
    return {"compare": "checker", "checker": {"lang_slug": "cpp", "source": LIB_CHECKER, "files": files}}


def test_a_checker_brings_its_header_inline_or_from_the_file_store_and_it_is_part_of_the_build(server):
    tests = [{"stdin": "1 2"}, {"stdin": "2 2"}]
    inline = judge(server, AB, tests, **checker_with({"checkerlib.h": CHECKERLIB % "inline %s"})).json()
    assert verdicts(inline) == ["AC", "WA"], inline
    assert [t["checker_message"] for t in inline["tests"]] == ["inline ok", "inline no"]
    # uploaded once, named by id: the same source with another header is another build
    stored = server.client.post("/files", content=(CHECKERLIB % "stored %s").encode()).json()["id"]
    body = judge(server, AB, tests, **checker_with({"checkerlib.h": {"file": stored}})).json()
    assert verdicts(body) == ["AC", "WA"], body
    assert [t["checker_message"] for t in body["tests"]] == ["stored ok", "stored no"]


def test_an_interactor_brings_its_files(server):
    interactor = "import sys\nfrom rules import reply\nprint(reply(open(sys.argv[1]).read()), flush=True)\nsys.exit(0 if input() == 'thanks' else 1)\n"
    rules = server.client.post("/files", content=b"def reply(given):\n    return given.strip().upper()\n").json()["id"]
    solution = "print('thanks' if input() == 'HELLO' else 'what', flush=True)\n"
    body = judge(server, solution, [{"stdin": "hello"}, {"stdin": "bye"}], interactor={"lang_slug": "python", "source": interactor, "files": {"rules.py": {"file": rules}}}).json()
    assert verdicts(body) == ["AC", "WA"], body


def test_a_submissions_files_may_be_stored_files(server):
    helper = server.client.post("/files", content=b"def add(a, b):\n    return a + b\n").json()["id"]
    body = judge(server, "from helper import add\nprint(add(*map(int, input().split())))\n", files={"helper.py": {"file": helper}}).json()
    assert body["verdict"] == "AC", body


MISSING = "sha256:" + "1" * 64


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (checker_with({"../testlib.h": ""}), "checker.files: '../testlib.h' is not a file name"),
        (checker_with({"main.cpp": ""}), "checker.files: 'main.cpp' is the judge file's name"),
        (checker_with({"answer": ""}), "checker.files: 'answer' is the name of a file kiln gives the checker"),
        (checker_with({"testlib.h": 3}), 'checker.files.testlib.h must be a string or {"file": "sha256:..."}'),
        (checker_with({"testlib.h": {"file": "sha256:ABC"}}), "checker.files.testlib.h.file must be a file id sha256:<64 lowercase hex>"),
        (checker_with({"testlib.h": {"file": MISSING, "more": 1}}), 'checker.files.testlib.h must be a string or {"file": "sha256:..."}'),
        (checker_with({"testlib.h": {"file": MISSING}}), f"checker.files.testlib.h: unknown file {MISSING}"),
        (checker_with([]), "checker.files must be an object of file name -> text or {\"file\": id}"),
        ({"interactor": {"lang_slug": "python", "source": "", "files": {"record": ""}}}, "interactor.files: 'record' is the name of a file kiln gives the interactor"),
        ({"files": {"helper.py": {"file": MISSING}}}, f"files.helper.py: unknown file {MISSING}"),
    ],
)
def test_bad_files_of_a_checker_or_interactor_are_a_400_that_names_the_field(server, fields, error):
    answer = judge(server, AB, [{"stdin": "1 2", "expected": "3"}], **fields)
    assert answer.status_code == 400 and answer.json()["error"].startswith(error), answer.json()


def test_a_builds_stored_files_past_what_a_build_job_carries_are_a_400_before_any_build(start_server):
    # each file within RUN_FILE_MAX, together past max(RUN_JUDGE_INPUT_MAX, RUN_FILE_MAX)
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="1", RUN_FILE_MAX="64k", RUN_JUDGE_INPUT_MAX="32k")
    ids = [srv.client.post("/files", content=f"# {i}\n".encode() + b"x = 1\n" * 6000).json()["id"] for i in range(2)]
    answer = judge(srv, files={f"m{i}.py": {"file": file_id} for i, file_id in enumerate(ids)})
    size = 2 * len(b"# 0\n" + b"x = 1\n" * 6000) + len(AB)
    assert answer.status_code == 400 and answer.json()["error"].startswith(f"files: {size} bytes in all with the source, above the maximum of 65536"), answer.json()


# --- interactors ----------------------------------------------------------------------------------

INTERACTOR = (
    "import sys\n"
    "hidden = int(open(sys.argv[1]).read())\n"
    "record = open(sys.argv[2], 'w')\n"
    "for tries in range(1, 21):\n"
    "    line = sys.stdin.readline()\n"
    "    if not line:\n"
    "        print('no guess', file=sys.stderr); sys.exit(2)\n"
    "    guess = int(line)\n"
    "    record.write(f'{guess}\\n')\n"
    "    if guess == hidden:\n"
    "        print('=', flush=True); print(f'found in {tries}', file=sys.stderr); sys.exit(0)\n"
    "    print('<' if hidden < guess else '>', flush=True)\n"
    "print('too many', file=sys.stderr); sys.exit(1)\n"
)
SEARCH = (
    "low, high = 1, 1000\n"
    "while True:\n"
    "    middle = (low + high) // 2\n"
    "    print(middle, flush=True)\n"
    "    answer = input()\n"
    "    if answer == '=':\n        break\n"
    "    low, high = (low, middle - 1) if answer == '<' else (middle + 1, high)\n"
)


def tries(hidden: int) -> int:
    """SEARCH's guesses to find `hidden`."""
    low, high, count = 1, 1000, 1
    while (middle := (low + high) // 2) != hidden:
        low, high, count = (low, middle - 1, count + 1) if hidden < middle else (middle + 1, high, count + 1)
    return count


def interactive(server, solution, tests, **fields):
    return judge(server, solution, tests, interactor={"lang_slug": "python", "source": INTERACTOR}, **fields).json()


def test_an_interactor_talks_with_the_submission_and_gives_the_verdict(server):
    body = interactive(server, SEARCH, [{"stdin": "500"}, {"stdin": "1"}, {"stdin": "777"}])
    assert (body["verdict"], body["passed"]) == ("AC", 3), body
    assert [t["checker_message"] for t in body["tests"]] == [f"found in {tries(hidden)}\n" for hidden in (500, 1, 777)]
    assert body["tests"][0]["stdout"] == "500\n"  # what the submission wrote


def test_an_interactor_may_say_more_than_the_output_cap_to_the_submission(server):
    # 2 MB to the submission, past RUN_OUTPUT_MAX (1 MiB): its stdout is the submission's input,
    # bounded by time; the interactor was killed at the cap and the test was IE
    talks = (
        "import sys\n"
        "sys.stdout.write(('x' * 99 + '\\n') * 20000 + 'end\\n'); sys.stdout.flush()\n"
        "heard = input()\n"
        "print('heard', heard, file=sys.stderr); sys.exit(0 if heard == '20000' else 1)\n"
    )
    counts = "import sys\nn = 0\nfor line in sys.stdin:\n    if line == 'end\\n':\n        break\n    n += 1\nprint(n, flush=True)\n"
    wrong = counts.replace("print(n,", "print(n + 1,")
    for solution, verdict in ((counts, "AC"), (wrong, "WA")):
        body = judge(server, solution, [{"stdin": "0"}], interactor={"lang_slug": "python", "source": talks}, limits={"time": "10s"}).json()
        assert verdicts(body) == [verdict], body


def test_an_interactors_exit_code_is_the_verdict_and_a_silent_submission_is_TLE(server):
    twenty_ones = "for _ in range(20):\n    print(1, flush=True)\n    if input() == '=':\n        break\n"
    body = interactive(server, twenty_ones, [{"stdin": "5"}, {"stdin": "1"}])
    assert verdicts(body) == ["WA", "AC"], body
    assert body["tests"][0]["checker_message"] == "too many\n"
    waits = "input()\n"  # waits for a word the interactor never sends (it waits too)
    [test] = interactive(server, waits, [{"stdin": "5"}], limits={"time": "1s", "wall_time": "1500ms"})["tests"]
    assert test["verdict"] == "TLE" and test["stats"]["cpu_ms"] < 500, test  # an idle wait, ended by wall time
    leaves = "print(3, flush=True)\n"  # says one thing and exits: the interactor reads end-of-file
    [test] = interactive(server, leaves, [{"stdin": "5"}])["tests"]
    assert (test["verdict"], test["checker_message"]) == ("PE", "no guess\n"), test


def test_an_interactor_gets_the_tests_expected_answer_as_its_third_argument(server):
    reads = "import sys\nprint(len(sys.argv) - 1, open(sys.argv[3]).read() if len(sys.argv) > 3 else '-', file=sys.stderr)\n"
    solution = "pass\n"
    tests = [{"stdin": "1", "expected": "forty-two"}, {"stdin": "1"}]
    body = judge(server, solution, tests, interactor={"lang_slug": "python", "source": reads}).json()
    assert [t["checker_message"] for t in body["tests"]] == ["3 forty-two\n", "2 -\n"], body


def test_a_submission_that_crashes_keeps_its_own_verdict(server):
    [test] = interactive(server, "import os\nos.kill(os.getpid(), 9)\n", [{"stdin": "5"}])["tests"]
    assert test["verdict"] == "RE", test


def test_interactive_tests_take_at_most_RUN_JUDGE_PARALLEL_slots_at_a_time(start_server):
    """Each interactive test takes two slots (its submission's, its interactor's): with
    RUN_JUDGE_PARALLEL 2, one such test at a time, each starting once the last has ended."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="4")  # RUN_JUDGE_PARALLEL: 2
    starts = "import sys, time\nprint(time.time(), file=sys.stderr)\ntime.sleep(0.6)\n"
    body = judge(srv, "pass\n", [{"stdin": "1"}] * 3, interactor={"lang_slug": "python", "source": starts}).json()
    assert verdicts(body) == ["AC"] * 3, body
    began = sorted(float(t["checker_message"]) for t in body["tests"])
    assert all(later - earlier >= 0.6 for earlier, later in zip(began, began[1:])), began


def test_an_interactor_with_compare_is_a_400(server):
    answer = judge(server, SEARCH, [{"stdin": "1"}], compare="tokens", interactor={"lang_slug": "python", "source": INTERACTOR})
    assert answer.status_code == 400 and answer.json()["error"] == "interactor is given: compare must not be (the interactor gives the verdict)"


# --- an interactor and a checker together (Polygon's model) -------------------------------------

# it only talks and writes a record: the sum the submission answered, whatever it is
RECORDER = (
    "import sys\n"
    "a, b = open(sys.argv[1]).read().split()\n"
    "print(a, b, flush=True)\n"
    "said = sys.stdin.readline()\n"
    "if not said:\n    print('said nothing', file=sys.stderr); sys.exit(2)\n"
    "open(sys.argv[2], 'w').write(said)\n"
    "print('recorded', file=sys.stderr)\n"
)
# the problem's checker judges the record: input, the record, the expected answer
RECORD_CHECKER = (
    "import sys\n"
    "given, record, answer = (open(path).read() for path in sys.argv[1:4])\n"
    "a, b = map(int, given.split())\n"
    "print('record', record.split(), 'answer', answer.split())\n"
    "sys.exit(0 if record.split() == [str(a + b)] else 1)\n"
)


SUM = "a, b = map(int, input().split())\nprint(a + b, flush=True)\n"  # it answers before its input's end


def with_recorder(interactor=RECORDER, **fields) -> dict:
    return {"interactor": {"lang_slug": "python", "source": interactor}, "checker": {"lang_slug": "python", "source": RECORD_CHECKER}, **fields}


def test_an_interactor_and_a_checker_together_the_checker_judges_the_interactors_record(server):
    tests = [{"stdin": "1 2", "expected": "3"}, {"stdin": "5 5"}]
    right = judge(server, SUM, tests, **with_recorder()).json()
    assert verdicts(right) == ["AC", "AC"], right
    assert [t["checker_message"] for t in right["tests"]] == ["record ['3'] answer ['3']\n", "record ['10'] answer []\n"]
    assert right["tests"][0]["stdout"] == "3\n"  # what the submission wrote
    wrong = judge(server, SUM.replace("a + b", "a - b"), tests, **with_recorder(compare="checker")).json()
    assert verdicts(wrong) == ["WA", "WA"], wrong  # the interactor exited 0: its record was wrong
    assert wrong["tests"][0]["checker_message"] == "record ['-1'] answer ['3']\n"


def test_with_a_checker_the_submissions_verdict_comes_first_then_the_interactors(server):
    crashes = judge(server, "import os\nos.kill(os.getpid(), 9)\n", [{"stdin": "1 2"}], **with_recorder()).json()
    assert verdicts(crashes) == ["RE"], crashes
    silent = judge(server, "pass\n", [{"stdin": "1 2"}], **with_recorder()).json()
    assert verdicts(silent) == ["PE"] and silent["tests"][0]["checker_message"] == "said nothing\n", silent
    failing = judge(server, SUM, [{"stdin": "1 2"}], **with_recorder(RECORDER + "sys.exit(3)\n")).json()
    assert verdicts(failing) == ["IE"], failing


def test_an_interactors_record_past_the_tests_output_limit_is_OLE(server):
    writes = "import sys\nopen(sys.argv[2], 'w').write('3 ' * 1000)\nprint(1, 2, flush=True)\ninput()\n"
    body = judge(server, SUM, [{"stdin": "1 2"}], **with_recorder(writes, limits={"output": "1k"})).json()
    assert verdicts(body) == ["OLE"], body
    within = judge(server, SUM, [{"stdin": "1 2"}], **with_recorder(writes.replace("1000", "400"), limits={"output": "1k"})).json()
    assert verdicts(within) == ["WA"], within  # the checker saw the whole record


def test_with_a_checker_the_interactor_still_says_more_than_the_output_limit_to_the_submission(server):
    # the interactor's output limit is the test's (its record's bound), not what it says: 5 KB
    # to a submission whose own output limit is 1k
    talks = "import sys\nprint('x' * 5000, flush=True)\nsaid = input()\nopen(sys.argv[2], 'w').write(said)\n"
    counts = "print(len(input()), flush=True)\n"
    body = judge(server, counts, [{"stdin": "5000"}], interactor={"lang_slug": "python", "source": talks},
                 checker={"lang_slug": "python", "source": "import sys\nsys.exit(0 if open(sys.argv[2]).read() == '5000' else 1)\n"}, limits={"output": "1k"}).json()  # fmt: skip
    assert verdicts(body) == ["AC"], body


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (with_recorder(compare="tokens"), "interactor and checker are given: compare must be checker or omitted (got tokens)"),
        ({"interactor": {"lang_slug": "python", "source": RECORDER}, "compare": "checker"}, "checker is required when compare is checker"),
    ],
)
def test_an_interactor_with_a_checker_and_another_compare_is_a_400(server, fields, error):
    answer = judge(server, SUM, [{"stdin": "1 2"}], **fields)
    assert answer.status_code == 400 and answer.json()["error"] == error, answer.json()


# --- bad requests --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"lang_slug": "cobol"}, "unsupported lang_slug"),
        ({"solution_text": None}, "solution_text is required"),
        ({"tests": None}, "tests is required"),
        ({"tests": []}, "tests must have 1 to 20 tests (got 0)"),
        ({"tests": [{"stdin": "1"}] * 21}, "tests must have 1 to 20 tests (got 21)"),
        ({"tests": [{"stdin": "1"}]}, "tests[0]: expected or expected_file is required (unless compare is checker or none, or an interactor is given)"),
        ({"tests": [{"stdin": "1", "stdin_file": "sha256:" + "0" * 64, "expected": ""}]}, "tests[0]: stdin and stdin_file are exclusive: give one"),
        ({"tests": [{"stdin_file": "sha256:ABC", "expected": ""}]}, "tests[0].stdin_file must be a file id sha256:<64 lowercase hex>"),
        ({"compare": "fuzzy"}, "compare must be one of tokens, line_tokens, lines, exact, float, line_floats, exact_floats, checker, none (got 'fuzzy')"),
        ({"ignore_case": "yes"}, "ignore_case must be a boolean (true or false)"),
        ({"ignore_case": True, "compare": "none"}, "ignore_case applies to compare tokens, line_tokens, lines, exact, float, line_floats, exact_floats (got compare none)"),
        ({"epsilon": -1}, "epsilon must be a number >= 0"),
        ({"files": {"../x.py": ""}}, "files: '../x.py' is not a file name"),
        ({"files": {"a/b.py": ""}}, "files: 'a/b.py' is not a file name"),
        ({"files": {"main.py": ""}}, "files: 'main.py' is the judge file's name"),
        ({"files": {f"f{i}.py": "" for i in range(65)}}, "files: at most 64 files"),
        ({"limits": {"time": "11s"}}, "limits.time 11s is above its maximum of 10s"),
        ({"limits": {"memory": "2g"}}, "limits.memory 2g is above its maximum of 1g"),
        ({"limits": {"memory": "1023k"}}, "limits.memory must be at least 1m"),
        ({"limits": {"memory": 1}}, "limits.memory must be at least 1m"),
        ({"limits": {"pids": 100000}}, "limits.pids 100000 is above its maximum of 256"),
        ({"limits": {"time": "2s", "wall_time": "1s"}}, "limits.wall_time (1s) is below limits.time (2s)"),
        ({"limits": {"time": 5}}, 'limits.time must be a duration string such as "500ms", "2s" or "1m"'),
        ({"limits": {"memroy": "64m"}}, "limits.memroy: not a limit (one of time, wall_time, memory, output, pids, address_space)"),
        ({"compile_timeout": "10m"}, "compile_timeout 10m is above its maximum of 5m"),
        ({"stop_on_failure": "yes"}, "stop_on_failure must be a boolean (true or false)"),
    ],
)
def test_a_bad_request_is_a_400_that_names_the_field(server, fields, error):
    body = {"lang_slug": "python", "solution_text": AB, "tests": [{"stdin": "1 2", "expected": "3"}], **fields}
    answer = server.client.post("/judge", content=json.dumps({k: v for k, v in body.items() if v is not None}))
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(error), answer.json()


def test_a_body_over_the_judge_input_max_is_413(server):
    huge = judge(server, tests=[{"stdin": "x" * (17 << 20), "expected": ""}])
    assert huge.status_code == 413 and huge.json() == {"error": "payload too large"}


# --- the client leaves -------------------------------------------------------------------------


def test_a_judge_request_whose_client_hangs_up_stops_its_tests_and_frees_its_slots(server):
    body = json.dumps({"lang_slug": "python", "solution_text": "import time\ntime.sleep(60)\n", "tests": [{"stdin": "", "expected": ""}] * 20, "limits": {"time": "10s", "wall_time": "60s"}}).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        client.sendall(b"POST /judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        deadline = time.monotonic() + 20
        while len(server.busy_slots()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.busy_slots()) >= 2  # RUN_JUDGE_PARALLEL = 4 / 2 tests at a time
    deadline = time.monotonic() + 15
    while (server.busy_slots() or len(server.warm_slots()) < 4) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.busy_slots() and len(server.warm_slots()) == 4
    assert judge(server).json()["verdict"] == "AC"
    [logged] = [r for r in server.logged("request") if r.get("path") == "/judge" and r.get("status") == 499]
    assert logged["outcome"] == "cancelled"


def test_judge_requests_and_verdicts_are_counted(server):
    judge(server, tests=[{"stdin": "1 1", "expected": "2"}, {"stdin": "1 1", "expected": "5"}])
    metrics = server.client.get("/metrics").text
    assert 'kiln_judge_requests_total{lang="python",verdict="WA"}' in metrics
    assert 'kiln_judge_tests_total{lang="python",verdict="AC"}' in metrics
    assert 'kiln_judge_builds_total{hit="false",lang="python"}' in metrics


def test_languages_say_which_judge(server):
    languages = {l["slug"]: l for l in server.client.get("/languages").json()["languages"]}
    assert (languages["python"]["judge"], languages["python"]["judge_file"], languages["python"]["judge_time"]) == (True, "main.py", "1s")
    assert languages["cpp"]["judge_file"] == "main.cpp"
    assert alive(server.pids()["zygote"])


# --- /run's limits (DESIGN.md, Judge API: a client may ask for less than the server's) ---------


def test_run_takes_less_memory_pids_or_output_than_the_servers(server):
    hungry = server.run(solution_text="x = bytearray(100 << 20)\nprint(len(x))\n", limits={"memory": "48m"}).json()
    assert hungry["stats"]["outcome"] == "out_of_memory"
    assert server.run(solution_text="x = bytearray(100 << 20)\nprint(len(x))\n").json()["stdout"] == "104857600\n"
    forks = "import os, time\nfor _ in range(8):\n    if os.fork() == 0:\n        time.sleep(2)\n        os._exit(0)\n"
    assert server.run(solution_text=forks, limits={"pids": 4}).json()["stats"]["outcome"] == "pids_limit"
    assert server.run(solution_text=forks).json()["stats"]["outcome"] == "exited"
    loud = server.run(solution_text="print('x' * 5000)\n", limits={"output": 1000})
    assert loud.status_code == 413 and loud.json() == {"error": "output too large"}
    assert server.run(solution_text="print('x' * 5000)\n").status_code == 200


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        ({"memory": "2g"}, "limits.memory 2g is above its maximum of 1g"),
        ({"memory": "512k"}, "limits.memory must be at least 1m"),
        ({"time": "1s"}, "limits.time: /run takes only memory, pids and output (a time limit is its timeout)"),
        ({"output": 0}, "limits.output must be at least 1"),
        ("64m", "limits must be an object (memory, pids, output)"),
    ],
)
def test_run_refuses_limits_it_cannot_take(server, limits, error):
    answer = server.run(solution_text="print(1)", limits=limits)
    assert answer.status_code == 400 and answer.json()["error"] == error


def test_checkers_and_interactors_run_within_a_short_timeout_max(start_server):
    """Their own wall limit (10 s, or the test's + 1 s) never goes past RUN_TIMEOUT_MAX: kiln-init
    would refuse the job and every test would be IE."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2", RUN_TIMEOUT_MAX="3s")
    checked = judge(srv, ECHO, [{"stdin": "1 2 3"}], compare="checker", checker={"lang_slug": "python", "source": CHECKER}, limits={"time": "1s"}).json()
    assert verdicts(checked) == ["AC"], checked
    talked = judge(srv, SEARCH, [{"stdin": "42"}], interactor={"lang_slug": "python", "source": INTERACTOR}, limits={"time": "1s", "wall_time": "3s"}).json()
    assert verdicts(talked) == ["AC"], talked


# --- a slot runs a request's tests one after another, each in a fresh sandbox ----------------------


def kept_slots(srv) -> bool:
    """Whether a slot runs a request's tests one after another: with cgroups, v1 or v2 (there from
    Linux 6.12 with its memory peak set back through the descriptor it is read from, before that
    kernel each test after the first in a cgroup of its own below the slot's: test_cgroups)."""
    return srv.logged("cgroup driver")[0]["driver"] in ("v1", "v2")


def in_test_cgroups(srv) -> bool:
    """Whether a kept slot's later tests each take a cgroup of their own: v2 before Linux 6.12,
    whose memory.peak cannot be set back. Told by the kernel, not by kiln."""
    return srv.logged("cgroup driver")[0]["driver"] == "v2" and kernel.release_version(os.uname().release) < (6, 12)


def warmups(srv) -> float:
    text = srv.client.get("/metrics").text
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith("kiln_slot_warmup_seconds_count")))


def test_a_requests_tests_reuse_their_slots_and_nothing_of_one_test_reaches_the_next(server):
    # each test: what it finds of earlier tests (a file in /tmp and in its cwd, a SysV shared
    # memory segment, a process left running), then leaves all of those behind
    solution = (
        "import ctypes, os, subprocess, sys, time\n"
        "libc = ctypes.CDLL(None)\n"
        "found = [os.path.exists('/tmp/left'), os.path.exists('left'), libc.shmget(4242, 4096, 0) != -1,\n"
        "         any(open(f'/proc/{p}/cmdline').read().startswith('sleep') for p in os.listdir('/proc') if p.isdigit())]\n"
        "open('/tmp/left', 'w').write('x'); open('left', 'w').write('x')\n"
        "libc.shmget(4242, 4096, 0o1600)\n"
        "subprocess.Popen(['sleep', '60'])\n"
        "x = bytearray(int(sys.stdin.read()) << 20)\n"
        "print(found, os.getpid() > 1)\n"
    )
    sizes = [120, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]  # only the first test takes a lot of memory
    before = warmups(server)
    body = judge(server, solution, [{"stdin": str(n), "expected": "[False, False, False, False] True"} for n in sizes], limits={"memory": "200m", "time": "5s"}).json()
    assert verdicts(body) == ["AC"] * len(sizes), body
    peaks = [t["stats"]["memory_peak_bytes"] for t in body["tests"]]
    assert peaks[0] > 120 << 20 and max(peaks[1:]) < 60 << 20, peaks  # each test's own peak
    assert not kept_slots(server) or warmups(server) - before < len(sizes) - 2  # fewer fresh slots than tests: they were reused


def test_a_kept_slots_tests_each_have_their_own_memory_peak_after_checks_that_took_much(server):
    # each check takes 200 MB in its test's slot; an honest solution under 128m is AC only if
    # the slot's memory peak is set back before each next test (on v2: through the descriptor
    # kiln-init reads it from, or the reads go on seeing the check's). And one slot ran them
    # where the kernel can set the peak back: fewer fresh slots than tests
    checker = "import sys\nx = bytearray(200 << 20)\nsys.exit(0 if open(sys.argv[2]).read().split() == [str(2 * int(open(sys.argv[1]).read()))] else 1)\n"
    tests = [{"stdin": str(n)} for n in range(8)]
    before = warmups(server)
    body = judge(server, "print(2 * int(input()))\n", tests, compare="checker", checker={"lang_slug": "python", "source": checker}, limits={"memory": "128m"}).json()
    assert verdicts(body) == ["AC"] * len(tests), [t["stats"] for t in body["tests"]]
    assert max(t["stats"]["memory_peak_bytes"] for t in body["tests"]) < 64 << 20, [t["stats"] for t in body["tests"]]
    if kept_slots(server):
        assert warmups(server) - before < len(tests), "a test and its check took a fresh slot each"
    ready = server.logged("cgroup subtree ready")[0]
    assert ready["judge_tests_share_a_slot"] == kept_slots(server) and ready["judge_tests_in_own_cgroups"] == in_test_cgroups(server)  # kiln's own look agrees


def test_a_test_killed_for_memory_leaves_the_next_tests_verdicts_their_own(server):
    solution = "import sys\nn = int(sys.stdin.read())\nx = bytearray(n << 20)\nprint(3)\n"
    body = judge(server, solution, [{"stdin": "300", "expected": "3"}] + [{"stdin": "1", "expected": "3"}] * 5, limits={"memory": "64m"}).json()
    assert verdicts(body) == ["MLE"] + ["AC"] * 5, body
    forks = "import os, sys, time\nfor _ in range(int(sys.stdin.read())):\n    if os.fork() == 0:\n        time.sleep(1)\n        os._exit(0)\nprint(3)\n"
    body = judge(server, forks, [{"stdin": "40", "expected": "3"}] + [{"stdin": "1", "expected": "3"}] * 5, limits={"pids": 16}).json()
    assert verdicts(body) == ["RE"] + ["AC"] * 5, body
    assert body["tests"][0]["stats"]["outcome"] == "pids_limit" and {t["stats"]["outcome"] for t in body["tests"][1:]} == {"exited"}


def test_a_slots_later_tests_have_every_limit_and_figure_of_the_first(server):
    if not kept_slots(server):
        pytest.skip("no cgroup driver here: a later test's limits and figures are the cgroup's")
    """Each test in a kept slot is in the slot's cgroup like the first: its memory limit, its CPU
    time (counted and stopped), its pids limit, its own figures."""
    solution = (
        "import os, sys, time\n"
        "what = sys.stdin.read().strip()\n"
        "if what == 'memory':\n    x = bytearray(200 << 20)\n"
        "if what == 'spin':\n    while True: pass\n"
        "if what == 'fork':\n    [os.fork() or time.sleep(1) for _ in range(40)]\n"
        "if what == 'work':\n    sum(range(3_000_000))\n"
        "print(3)\n"
    )
    order = ["work", "work", "memory", "work", "spin", "work", "fork", "work"]
    # time for a python's start and its work under emulation on a busy host (a guest counts the
    # time its vCPU waits for the host's as its tasks' CPU): 500ms made every test TLE there
    limits = {"memory": "64m", "time": "2s", "wall_time": "20s", "pids": 16}
    body = judge(server, solution, [{"stdin": w, "expected": "3"} for w in order], limits=limits).json()
    assert verdicts(body) == ["AC", "AC", "MLE", "AC", "TLE", "AC", "RE", "AC"], body
    works = [t["stats"]["cpu_ms"] for t, w in zip(body["tests"], order) if w == "work"]
    assert all(cpu > 20 for cpu in works), works  # from the cgroup: the test's own
    # the spin stopped at its CPU time, long before its wall time
    assert body["tests"][4]["stats"]["wall_ms"] < 15_000 and body["tests"][6]["stats"]["outcome"] == "pids_limit"


def test_a_slot_runs_hundreds_of_tests_each_with_its_own_figures(start_server):
    """One slot runs all of a request's tests (one at a time), past what init's descriptors would
    allow if it kept any of a test's: every test runs, with its own CPU figure (a baseline that
    could not be read made a test's figure the slot's whole CPU so far: a false TLE)."""
    srv = start_server(RUN_LANGS="cpp", RUN_CONCURRENCY="2", RUN_JUDGE_PARALLEL="1", RUN_JUDGE_TESTS_MAX="400")
    if not kept_slots(srv):
        pytest.skip("no cgroup driver here: a test's figures are the cgroup's")
    tests = [{"stdin": f"{i} {i}\n", "expected": str(2 * i)} for i in range(400)]
    body = judge(srv, AB_CPP, tests, lang="cpp", limits={"time": "200ms"}).json()
    assert verdicts(body) == ["AC"] * 400, [(i, t["verdict"], t["stats"]) for i, t in enumerate(body["tests"]) if t["verdict"] != "AC"][:5]
    cpu = [t["stats"]["cpu_ms"] for t in body["tests"]]
    assert max(cpu) < 100, sorted(cpu)[-5:]


def test_a_test_leaves_nothing_in_the_network_namespace_for_the_next(start_server):
    """The tests of a request run one after another in one slot (RUN_JUDGE_PARALLEL 1), each in
    a network namespace of its own: IPv6 flow labels, which outlive their sockets, do not carry."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2")  # RUN_JUDGE_PARALLEL: 1
    body = judge(srv, flow_label_claims(), [{"stdin": "", "expected": "new"}] * 3).json()
    assert verdicts(body) == ["AC"] * 3, [t["stdout"] for t in body["tests"]]


def test_a_later_test_sees_the_pids_a_first_test_sees(start_server):
    """Each test of a request sees the process numbers a first test of a fresh request sees (its
    own pid, its parent's, the pids under /proc): none tells how many processes earlier tests
    of the request made. RUN_JUDGE_PARALLEL 1: one slot runs them one after another."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2")
    if not kept_slots(srv):
        pytest.skip("no cgroup driver here: a later test's limits and figures are the cgroup's")
    seen = "import os\nprint(os.getpid(), os.getppid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    [first] = [t["stdout"] for t in judge(srv, seen, [{"stdin": "", "expected": ""}]).json()["tests"]]
    forks = seen + "import sys\nsys.stdout.flush()\nfor _ in range(20):\n    os.fork() or os._exit(0)\n"  # the next test's pids grew by these
    later = [t["stdout"] for t in judge(srv, forks, [{"stdin": "", "expected": ""}] * 3).json()["tests"]]
    assert later == [first] * 3, (first, later)


def test_on_v2_before_6_12_a_kept_slots_later_tests_each_run_in_a_cgroup_of_their_own(start_server):
    """Where memory.peak cannot be set back, a kept slot's tests after its first each run in
    test-<n> below the slot's cgroup, made by the slot's init before the test and removed after
    it; the slot's own cgroup holds no process while they run. Seen from the host's cgroup tree
    while each test sleeps."""
    srv = start_server(RUN_LANGS="python", RUN_CONCURRENCY="2")  # RUN_JUDGE_PARALLEL: 1
    if not in_test_cgroups(srv):
        pytest.skip("the slot's memory peak is set back here (or no cgroup v2): its tests share its cgroup")
    [subtree] = srv.logged("cgroup subtree ready")[0]["subtree"]
    seen: dict[str, set[str]] = {}  # a slot's cgroup -> its test cgroups seen with a process in them
    busy_parents: set[str] = set()  # slot cgroups seen with a process while a test cgroup had one

    def procs(path: str) -> str:
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                return f.read().strip()
        except OSError:
            return ""

    def watch(done: threading.Event) -> None:
        while not done.is_set():
            for slot in (e.path for e in os.scandir(subtree) if e.name.startswith("slot-")):
                try:
                    children = [e.path for e in os.scandir(slot) if e.is_dir() and e.name.startswith("test-")]
                except OSError:
                    continue  # the slot ended meanwhile
                for child in children:
                    if procs(child):
                        seen.setdefault(slot, set()).add(os.path.basename(child))
                        if procs(slot):
                            busy_parents.add(slot)
            time.sleep(0.05)

    done = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        watching = pool.submit(watch, done)
        try:
            body = judge(srv, "import time\ntime.sleep(2)\nprint(3)\n", [{"stdin": "", "expected": "3"}] * 3, limits={"time": "5s", "wall_time": "20s"}).json()
        finally:
            done.set()
        watching.result()
    assert verdicts(body) == ["AC"] * 3, body
    assert any(names >= {"test-1", "test-2"} for names in seen.values()), seen  # the first test ran in the slot's own
    assert not busy_parents, busy_parents
    assert not [e for slot in seen for e in (os.scandir(slot) if os.path.isdir(slot) else ()) if e.name.startswith("test-")]  # removed after
