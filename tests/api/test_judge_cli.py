"""`kiln judge` (kiln/judgecli.py) as a subprocess against a real server: DESIGN.md, Judge API,
the `kiln judge` command and its details."""

from __future__ import annotations

import os
import pty
import random
import select
import subprocess
from pathlib import Path

import pytest

from kilntest import KILN, Server, free_port, wait_until

KEY = "judge-cli-key"
SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


@pytest.fixture(scope="module")
def srv():
    server = Server({"RUN_LANGS": "python", "RUN_API_KEYS": KEY}).wait_ready()
    yield server
    server.stop()


def make_tests(folder: Path, answer_suffix: str = ".out", **tests: tuple[str, str | None]) -> Path:
    """make_tests(folder, t1=("1 2\n", "3\n")) -> folder with t1.in and t1.out (no answer for None)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (stdin, answer) in tests.items():
        (folder / f"{name}.in").write_text(stdin)
        if answer is not None:
            (folder / f"{name}{answer_suffix}").write_text(answer)
    return folder


def sums(folder: Path, answer_suffix: str = ".out") -> Path:
    """Tests 1, 2 and 10 of a + b, new to the store: six files of their own (a random base)."""
    base = random.randrange(10**12)
    folder.mkdir(parents=True, exist_ok=True)
    for name, (a, b) in {"10": (base, 100), "2": (base, 20), "1": (base, 1)}.items():
        (folder / f"{name}.in").write_text(f"{a} {b}\n")
        (folder / f"{name}{answer_suffix}").write_text(f"{a + b}\n")
    return folder


def solution(tmp_path: Path, text: str = SUM) -> Path:
    path = tmp_path / "main.py"
    path.write_text(text)
    return path


def kiln_judge(*args, url: str | None = None, key: str | None = KEY, srv: Server | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KILN_API_KEY"}
    if key is not None:
        env["KILN_API_KEY"] = key
    argv = [str(KILN), "judge", *map(str, args), "--lang", "python"]
    if url or srv:
        argv += ["--url", url or srv.url]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def rows(stdout: str) -> list[list[str]]:
    """The table's rows (header excluded) as [name, verdict, ...]."""
    lines = stdout.splitlines()
    assert lines[0].split()[:4] == ["test", "verdict", "time", "memory"], stdout
    return [line.split() for line in lines[1:] if not line.startswith(("verdict:", "score:"))]


def requests_of(srv: Server, since: int) -> list[dict]:
    """The request log records after the first `since`, once the run's POST /judge is among them."""
    assert wait_until(lambda: any(r["path"] == "/judge" for r in srv.logged("request")[since:]), timeout=10)
    return srv.logged("request")[since:]


def test_all_accepted_in_natural_order_exits_0(srv, tmp_path):
    done = kiln_judge(solution(tmp_path), sums(tmp_path / "tests"), srv=srv)
    assert done.returncode == 0, done.stderr
    table = rows(done.stdout)
    assert [row[:2] for row in table] == [["1", "AC"], ["2", "AC"], ["10", "AC"]]
    assert all(row[3] == "ms" and row[5] in ("KiB", "MiB") for row in table)  # CPU time, memory
    assert done.stdout.splitlines()[-1] == "verdict: AC, 3/3 tests passed"


def test_a_wrong_answer_exits_1_with_its_row(srv, tmp_path):
    folder = sums(tmp_path / "tests")
    (folder / "2.out").write_text("11\n")
    done = kiln_judge(solution(tmp_path), folder, srv=srv)
    assert done.returncode == 1, done.stderr
    assert [row[:2] for row in rows(done.stdout)] == [["1", "AC"], ["2", "WA"], ["10", "AC"]]
    assert done.stdout.splitlines()[-1] == "verdict: WA on test 2, 2/3 tests passed"


def test_ignore_case_and_line_tokens_from_the_command_line(srv, tmp_path):
    folder = make_tests(tmp_path / "tests", one=("", "Yes 1\nno\n"))
    shouting = solution(tmp_path, "print('YES 1'); print('NO')\n")
    assert kiln_judge(shouting, folder, srv=srv).returncode == 1  # tokens compare case
    done = kiln_judge(shouting, folder, "--ignore-case", "--compare", "line_tokens", srv=srv)
    assert done.returncode == 0 and "verdict: AC" in done.stdout, done.stdout + done.stderr
    one_line = solution(tmp_path, "print('YES 1 NO')\n")
    assert kiln_judge(one_line, folder, "--ignore-case", "--compare", "line_tokens", srv=srv).returncode == 1
    refused = kiln_judge(shouting, folder, "--ignore-case", "--compare", "none", srv=srv)
    assert refused.returncode == 2 and "--ignore-case goes with --compare tokens, line_tokens" in refused.stderr


def test_a_runtime_error_names_its_exception(srv, tmp_path):
    folder = make_tests(tmp_path / "tests", one=("1 2\n", "3\n"))
    done = kiln_judge(solution(tmp_path, "raise ValueError('no way')\n"), folder, srv=srv)
    assert done.returncode == 1
    assert rows(done.stdout)[0][:2] == ["one", "RE"] and "exit 1: ValueError: no way" in done.stdout


def test_a_syntax_error_is_ce_with_the_compilers_words(srv, tmp_path):
    done = kiln_judge(solution(tmp_path, "def broken(:\n    pass\n"), sums(tmp_path / "tests"), srv=srv)
    assert done.returncode == 1, done.stderr
    assert "SyntaxError" in done.stdout and "compilation failed" in done.stdout
    assert done.stdout.splitlines()[-1] == "verdict: CE (compilation error), 0/3 tests passed"


def test_what_a_submission_or_its_compiler_says_reaches_the_terminal_with_its_control_characters_escaped(srv, tmp_path):
    # a window title and an OSC 52 clipboard write: shown as \x1b..., never sent raw
    title, clipboard = "\x1b]0;owned\x07", "\x1b]52;c;SGVsbG8=\x07"
    folder = make_tests(tmp_path / "tests", one=("1 2\n", "3\n"))
    runtime = kiln_judge(solution(tmp_path, f"import sys\nsys.stderr.write({title + clipboard!r} + '\\n'); sys.exit(3)\n"), folder, srv=srv)
    broken = kiln_judge(solution(tmp_path, f"x = 1 +  # {title}\n"), folder, srv=srv)
    assert runtime.returncode == broken.returncode == 1
    assert "\\x1b]0;owned\\x07\\x1b]52;c;SGVsbG8=\\x07" in runtime.stdout, runtime.stdout
    assert "\\x1b]0;owned\\x07" in broken.stdout and "compilation failed" in broken.stdout, broken.stdout
    assert "\x1b" not in runtime.stdout + broken.stdout and "\x07" not in runtime.stdout + broken.stdout


def test_a_second_run_uploads_nothing(srv, tmp_path):
    folder, main = sums(tmp_path / "tests"), solution(tmp_path)
    since = len(srv.logged("request"))
    assert kiln_judge(main, folder, srv=srv).returncode == 0
    first = requests_of(srv, since)
    uploads = [r for r in first if r["method"] == "POST" and r["path"] == "/files"]
    assert len(uploads) == 6 and all(r["status"] == 201 for r in uploads)  # 3 inputs, 3 answers
    since = len(srv.logged("request"))
    again = kiln_judge(main, folder, srv=srv)
    assert again.returncode == 0 and "all 6 files already on the server" in again.stderr
    second = requests_of(srv, since)
    assert [r for r in second if r["path"] == "/files"] == []
    assert sorted(r["method"] for r in second if r["path"].startswith("/files/")) == ["HEAD"] * 6


def test_ans_files_are_answers_too(srv, tmp_path):
    done = kiln_judge(solution(tmp_path), sums(tmp_path / "tests", answer_suffix=".ans"), srv=srv)
    assert done.returncode == 0, done.stderr
    assert [row[:2] for row in rows(done.stdout)] == [["1", "AC"], ["2", "AC"], ["10", "AC"]]


def test_a_missing_answer_is_a_usage_error_unless_compare_none(srv, tmp_path):
    folder = make_tests(tmp_path / "tests", a=("1 2\n", "3\n"), b=("2 2\n", None))
    since = len(srv.logged("request"))
    done = kiln_judge(solution(tmp_path), folder, srv=srv)
    assert done.returncode == 2 and done.stdout == ""
    assert "no answer for b.in" in done.stderr and "--compare none" in done.stderr
    assert srv.logged("request")[since:] == []  # refused before any request
    judged = kiln_judge(solution(tmp_path), folder, "--compare", "none", srv=srv)
    assert judged.returncode == 0, judged.stderr
    assert [row[:2] for row in rows(judged.stdout)] == [["a", "AC"], ["b", "AC"]]


def test_limits_and_compare_reach_the_server(srv, tmp_path):
    folder = make_tests(tmp_path / "tests", spin=("", "done\n"), float=("", "0.3333\n"))
    third = "print(1 / 3)\n"
    done = kiln_judge(solution(tmp_path, third), folder, "--compare", "float", "--epsilon", "1e-3", "--time", "500ms", "--memory", "64m", srv=srv)
    assert [row[:2] for row in rows(done.stdout)] == [["float", "AC"], ["spin", "WA"]]
    loop = kiln_judge(solution(tmp_path, "while True:\n    pass\n"), folder, "--time", "200ms", "--stop-on-failure", srv=srv)
    assert loop.returncode == 1 and rows(loop.stdout)[0][:2] == ["float", "TLE"]
    assert loop.stdout.splitlines()[-1].startswith("verdict: TLE on test float")


def test_a_checker_is_passed_to_the_server(srv, tmp_path):
    checker = tmp_path / "check.py"
    checker.write_text("import sys\nsys.exit(0)\n")
    folder = make_tests(tmp_path / "tests", one=("1 2\n", None))  # a checker needs no answer
    done = kiln_judge(solution(tmp_path), folder, "--checker", checker, "--checker-lang", "python", srv=srv)
    assert done.returncode == 0 and [row[:2] for row in rows(done.stdout)] == [["one", "AC"]], done.stderr
    checker.write_text("import sys\nprint('three is wrong')\nsys.exit(1)\n")
    rejected = kiln_judge(solution(tmp_path), folder, "--checker", checker, "--checker-lang", "python", srv=srv)
    assert rejected.returncode == 1 and rows(rejected.stdout)[0][:2] == ["one", "WA"] and "three is wrong" in rejected.stdout, rejected.stdout
    alone = kiln_judge(solution(tmp_path), folder, "--checker", checker, srv=srv)
    assert alone.returncode == 2 and "--checker-lang" in alone.stderr


def test_without_the_key_the_message_says_how_to_give_it(srv, tmp_path):
    done = kiln_judge(solution(tmp_path), sums(tmp_path / "tests"), srv=srv, key=None)
    assert done.returncode == 2 and "--api-key" in done.stderr and "KILN_API_KEY" in done.stderr


def test_an_unreachable_server_exits_2_saying_where(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    done = kiln_judge(solution(tmp_path), sums(tmp_path / "tests"), url=url)
    assert done.returncode == 2 and done.stdout == ""
    assert f"server not reachable at {url}" in done.stderr and "--url" in done.stderr


def test_without_a_terminal_progress_is_plain_lines(srv, tmp_path):
    done = kiln_judge(solution(tmp_path), sums(tmp_path / "tests"), srv=srv)
    assert done.returncode == 0
    assert "\r" not in done.stderr and "\x1b" not in done.stderr and "\r" not in done.stdout
    lines = done.stderr.splitlines()
    assert all(line.startswith("kiln judge: ") for line in lines), lines
    assert lines[0].endswith("3 tests in " + str(tmp_path / "tests"))
    assert "6 files uploaded" in lines[1] and "building main.py in python..." in lines[2]
    assert lines[3] in ("kiln judge: built (new), running 3 tests", "kiln judge: built (cached), running 3 tests")  # the stream's compile line
    assert "judged in" in lines[4]


def test_progress_names_the_first_failure_as_the_stream_brings_it(srv, tmp_path):
    tests = sums(tmp_path / "tests")
    (tests / "2.out").write_text("0\n")
    done = kiln_judge(solution(tmp_path), tests, srv=srv)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert "kiln judge: first failure so far: WA on test 2" in lines and lines.index("kiln judge: first failure so far: WA on test 2") < len(lines) - 1
    assert "verdict: WA on test 2, 2/3 tests passed" in done.stdout


def test_on_a_terminal_progress_is_a_bar_redrawn_in_place(srv, tmp_path):
    controller, terminal = pty.openpty()
    env = {**os.environ, "KILN_API_KEY": KEY}
    argv = [str(KILN), "judge", str(solution(tmp_path)), str(sums(tmp_path / "tests")), "--lang", "python", "--url", srv.url]
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=terminal) as proc:
        os.close(terminal)
        seen = b""
        while True:
            ready, _, _ = select.select([controller], [], [], 60)
            try:
                chunk = os.read(controller, 65536) if ready else b""
            except OSError:  # EIO: the terminal's last writer is gone
                chunk = b""
            if not chunk:
                break
            seen += chunk
        stdout = proc.stdout.read().decode()
    os.close(controller)
    assert proc.returncode == 0 and "verdict: AC" in stdout and "\r" not in stdout  # the table stays plain
    text = seen.decode()
    assert "\ruploading tests [" in text and "] 6/6" in text and "#" * 30 in text
    assert "building main.py in python" in text and text.count("\r\x1b[K") >= 1  # the bar is cleared
    assert "\rjudging [" in text and "] 3/3" in text  # the tests' bar, from the stream's lines


# --- a Polygon package (kiln/packages/polygon.py): the test writes its own, testlib.h included ------

# a header of this test's own named testlib.h (not testlib: the few calls the checker makes)
TESTLIB_H = r"""#pragma once
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
enum TResult { _ok = 0, _wa = 1, _pe = 2, _fail = 3 };
struct InStream {
    FILE *file = nullptr;
    long long readLong() { long long x; if (!file || fscanf(file, "%lld", &x) != 1) { fprintf(stderr, "no number"); exit(_pe); } return x; }
};
static InStream inf, ouf, ans;
inline void registerTestlibCmd(int argc, char **argv) {
    if (argc < 4) exit(_fail);
    inf.file = fopen(argv[1], "r"); ouf.file = fopen(argv[2], "r"); ans.file = fopen(argv[3], "r");
}
static FILE *tout = nullptr;
inline void registerInteraction(int argc, char **argv) {
    if (argc < 3) exit(_fail);
    inf.file = fopen(argv[1], "r"); tout = fopen(argv[2], "w"); ouf.file = stdin;
}
inline void quitf(TResult result, const char *format, ...) {
    va_list args; va_start(args, format); vfprintf(stderr, format, args); va_end(args); exit(result);
}
"""
CHECK_CPP = r"""#include "testlib.h"
int main(int argc, char **argv) {
    registerTestlibCmd(argc, argv);
    long long expected = ans.readLong(), found = ouf.readLong();
    if (expected != found) quitf(_wa, "expected %lld, found %lld", expected, found);
    quitf(_ok, "right: %lld", found);
}
"""
# tells the submission the test's number, writes what it answers to the record the checker judges
INTERACTOR_CPP = r"""#include "testlib.h"
int main(int argc, char **argv) {
    registerInteraction(argc, argv);
    long long n = inf.readLong();
    printf("%lld\n", n);
    fflush(stdout);
    fprintf(tout, "%lld\n", ouf.readLong());
    fclose(tout);
    quitf(_ok, "told %lld", n);
}
"""
# tests 01 (the sample, group 0), 02-03 (group 1, complete-group, 40 points, after 0), 04-05
# (group 2, each-test, 30 points a test, after 1): group 2 comes first in the file, as a package
# may list them; kiln takes dependencies first
PROBLEM_XML = """<?xml version="1.0" encoding="utf-8" standalone="no"?>
<problem revision="3" short-name="double">
  <judging cpu-name="Intel" cpu-speed="3600" input-file="" output-file="">
    <testset name="tests">
      <time-limit>2000</time-limit>
      <memory-limit>268435456</memory-limit>
      <test-count>5</test-count>
      <input-path-pattern>tests/%02d</input-path-pattern>
      <answer-path-pattern>tests/%02d.a</answer-path-pattern>
      <tests>
        <test method="manual" sample="true" group="0" points="0"/>
        <test method="manual" group="1"/>
        <test method="manual" group="1"/>
        <test method="generated" cmd="gen 4" group="2" points="30"/>
        <test method="generated" cmd="gen 5" group="2" points="30"/>
      </tests>
      <groups>
        <group feedback-policy="points" name="2" points-policy="each-test"><dependencies><dependency group="1"/></dependencies></group>
        <group feedback-policy="complete" name="0" points="0" points-policy="complete-group"/>
        <group feedback-policy="icpc" name="1" points="40" points-policy="complete-group"><dependencies><dependency group="0"/></dependencies></group>
      </groups>
    </testset>
  </judging>
  <files>
    <resources>
      <file path="files/olymp.sty"/>
      <file path="files/testlib.h" type="h.g++"/>
    </resources>
  </files>
  <assets>
    <checker name="check.cpp" type="testlib">
      <source path="files/check.cpp" type="cpp.g++17"/>
    </checker>
  </assets>
</problem>
"""
WRONG_ON_5 = "n = int(input())\nprint(2 * n if n % 10 != 5 else 0)\n"  # test 05s input ends in 5


def polygon_package(folder: Path, interactive: bool = False) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "files").mkdir()
    interactor = '<interactor><source path="files/interactor.cpp" type="cpp.g++17"/></interactor>' if interactive else ""
    (folder / "problem.xml").write_text(PROBLEM_XML.replace("  </assets>", f"    {interactor}\n  </assets>"))
    (folder / "files" / "interactor.cpp").write_text(INTERACTOR_CPP)
    (folder / "files" / "testlib.h").write_text(TESTLIB_H)
    (folder / "files" / "check.cpp").write_text(CHECK_CPP)
    (folder / "files" / "olymp.sty").write_text("% not a header: not sent\n")
    base = random.randrange(10**9)  # the tests new to the store
    for i in range(1, 6):
        n = base * 10 + i
        (folder / "tests" / f"{i:02d}").write_text(f"{n}\n")
        (folder / "tests" / f"{i:02d}.a").write_text(f"{2 * n}\n")
    return folder


@pytest.fixture(scope="module")
def polygon_srv():
    server = Server({"RUN_LANGS": "python,cpp", "RUN_API_KEYS": KEY}).wait_ready()
    yield server
    server.stop()


def test_a_polygon_package_is_judged_with_its_checker_points_and_groups(polygon_srv, tmp_path):
    package = polygon_package(tmp_path / "double")
    done = kiln_judge(solution(tmp_path, WRONG_ON_5), package, srv=polygon_srv)
    assert done.returncode == 1, done.stderr
    table = rows(done.stdout)
    assert [(row[0], row[1]) for row in table] == [("01", "AC"), ("02", "AC"), ("03", "AC"), ("04", "AC"), ("05", "WA")], done.stdout
    assert "expected" in done.stdout and "found 0" in done.stdout  # the package's checker's words
    assert "score: 70/100, group 0 0/0, group 1 40/40, group 2 30/60" in done.stdout  # each-test: 30 of 60; complete-group: 40
    assert "verdict: WA on test 05, 4/5 tests passed" in done.stdout
    assert "5 tests in " in done.stderr and "(a Polygon package)" in done.stderr
    assert "11 files uploaded" in done.stderr  # 5 inputs, 5 answers, testlib.h (olymp.sty is no header)


def test_an_interactive_polygon_package_runs_its_interactor_and_its_checker_judges_the_record(polygon_srv, tmp_path):
    package = polygon_package(tmp_path / "double", interactive=True)
    done = kiln_judge(solution(tmp_path, WRONG_ON_5), package, srv=polygon_srv)
    assert done.returncode == 1, done.stderr
    assert [(row[0], row[1]) for row in rows(done.stdout)] == [("01", "AC"), ("02", "AC"), ("03", "AC"), ("04", "AC"), ("05", "WA")], done.stdout
    assert "found 0" in done.stdout and "score: 70/100" in done.stdout  # the checker on the interactor's record


def test_a_polygon_packages_limits_apply_unless_the_command_line_gives_its_own(polygon_srv, tmp_path):
    package = polygon_package(tmp_path / "double")
    # test 01 takes 1.2 s of CPU: within the package's 2 s, over the command line's 1 s
    busy = "import time\nn = int(input())\nt = time.process_time()\nwhile n % 10 == 1 and time.process_time() - t < 1.2:\n    pass\nprint(2 * n)\n"
    done = kiln_judge(solution(tmp_path, busy), package, srv=polygon_srv)
    assert done.returncode == 0 and "verdict: AC" in done.stdout, done.stdout + done.stderr
    done = kiln_judge(solution(tmp_path, busy), package, "--time", "1s", srv=polygon_srv)
    assert done.returncode == 1 and "verdict: TLE on test 01" in done.stdout, done.stdout + done.stderr


def test_a_polygon_package_without_its_generated_tests_says_how_to_get_them(polygon_srv, tmp_path):
    package = polygon_package(tmp_path / "double")
    (package / "tests" / "04").unlink()
    done = kiln_judge(solution(tmp_path), package, srv=polygon_srv)
    assert done.returncode == 2 and done.stdout == ""
    assert "test 4:" in done.stderr and "generated" in done.stderr and "doall" in done.stderr
