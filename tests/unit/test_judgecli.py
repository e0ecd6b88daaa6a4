"""kiln/judgecli.py without a server: the tests folder, natural order, the table, the options."""

from __future__ import annotations

import http.server
import io
import re
import threading

import pytest

from kiln import cli, judgecli
from kiln.judgecli import UsageError, find_tests, natural_key, print_answer


def test_natural_order_compares_runs_of_digits_as_numbers():
    names = ["10", "2", "1", "test10", "test2", "a", "01", "b1c10", "b1c9"]
    assert sorted(names, key=natural_key) == ["01", "1", "2", "10", "a", "b1c9", "b1c10", "test2", "test10"]


def test_a_folder_of_tests(tmp_path):
    for name in ("10.in", "10.out", "2.in", "2.ans", "1.in", "1.out", "1.ans", "notes.txt", "orphan.out", ".in"):
        (tmp_path / name).write_text(name)
    (tmp_path / "dir.in").mkdir()
    tests = find_tests(tmp_path, answers_needed=True)
    assert [(t.name, t.input.name, t.answer.name) for t in tests] == [("1", "1.in", "1.out"), ("2", "2.in", "2.ans"), ("10", "10.in", "10.out")]


def test_missing_answers_are_named_with_what_to_do(tmp_path):
    for i in range(8):
        (tmp_path / f"{i}.in").write_text("")
    with pytest.raises(UsageError, match=r"no answer for 0.in, 1.in, 2.in, 3.in, 4.in and 3 more .*--compare none.*--checker"):
        find_tests(tmp_path, answers_needed=True)
    assert [t.answer for t in find_tests(tmp_path, answers_needed=False)] == [None] * 8


def test_an_empty_or_absent_folder_says_what_it_wants(tmp_path):
    with pytest.raises(UsageError, match="has no NAME.in files"):
        find_tests(tmp_path, answers_needed=True)
    with pytest.raises(UsageError, match="is not a folder"):
        find_tests(tmp_path / "nope", answers_needed=True)


def test_the_table_says_time_memory_and_why_a_test_failed():
    def test(name, verdict, stats=True, **more):
        stats = {"outcome": "exited", "wall_ms": 9.0, "cpu_ms": 12.4, "memory_peak_bytes": 3 << 20, "signal": None} if stats else None
        return {"name": name, "verdict": verdict, "exit_code": 0, "stdout": "", "stderr": "", "checker_message": None, "stats": stats, **more}

    answer = {
        "verdict": "RE", "passed": 1, "total": 4,
        "compile": {"exit_code": 0, "stdout": "", "stderr": "", "cached": True, "stats": None},
        "tests": [
            test("1", "AC"),
            test("2", "RE", exit_code=1, stderr="Traceback...\n  x\nZeroDivisionError: division by zero\n"),
            test("10", "WA", checker_message="wrong answer 2nd token\nmore\n"),
            test("11", "SK", stats=False, exit_code=None),
        ],
        "stats": {"wall_ms": 50.0},
    }
    out = io.StringIO()
    print_answer(answer, out)
    assert out.getvalue().splitlines() == [
        "test  verdict   time   memory",
        "1     AC       12 ms  3.0 MiB",
        "2     RE       12 ms  3.0 MiB  exit 1: ZeroDivisionError: division by zero",
        "10    WA       12 ms  3.0 MiB  wrong answer 2nd token",
        "11    SK           -        -",
        "verdict: RE on test 2, 1/4 tests passed",
    ]


def test_a_compile_that_timed_out():
    compile_ = {"exit_code": None, "stdout": "", "stderr": "", "cached": False, "stats": {"outcome": "timed_out"}}
    out = io.StringIO()
    print_answer({"verdict": "CE", "passed": 0, "total": 2, "compile": compile_, "tests": [], "stats": {}}, out)
    assert out.getvalue() == "compilation timed out\nverdict: CE (compilation error), 0/2 tests passed\n"


def test_a_compile_error_still_gives_each_test_its_row():
    compile_ = {"exit_code": 1, "stdout": "", "stderr": "main.cpp:1: error: x\n", "cached": False, "stats": {"outcome": "exited"}}
    skipped = {"verdict": "SK", "exit_code": None, "stdout": "", "stderr": "", "checker_message": None, "stats": None}
    out = io.StringIO()
    print_answer({"verdict": "CE", "passed": 0, "total": 2, "compile": compile_, "tests": [{**skipped, "name": "1"}, {**skipped, "name": "10"}], "stats": {}}, out)
    assert out.getvalue().splitlines() == [
        "compilation failed (exit 1):",
        "main.cpp:1: error: x",
        "test  verdict  time  memory",
        "1     SK          -       -",
        "10    SK          -       -",
        "verdict: CE (compilation error), 0/2 tests passed",
    ]


@pytest.mark.parametrize(
    "options, words",
    [
        (["--time", "2 s"], "'2 s' is not a duration"),
        (["--memory", "lots"], "'lots' is not a size"),
        (["--compare", "fuzzy"], "invalid choice"),
        ([], "--lang"),
    ],
)
def test_bad_options_are_usage_errors(options, words, capsys):
    lang = [] if not options else ["--lang", "python"]
    with pytest.raises(SystemExit) as exit_:
        cli.main(["judge", "main.py", "tests", *lang, *options])
    assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_a_url_that_is_not_http_is_a_usage_error():
    with pytest.raises(UsageError, match="not an http:// or https:// address"):
        judgecli.Api("localhost:4040", None)


# --- the streamed answer as the client reads it (kiln/judge_client.py): a stand-in server ------


class _Streaming(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    lines: list[bytes] = []

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in self.lines:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def streaming():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Streaming)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield lambda *lines: (setattr(_Streaming, "lines", list(lines)), f"http://127.0.0.1:{server.server_address[1]}")[1]
    server.shutdown()
    server.server_close()


COMPILED = b'{"event":"compile","exit_code":0,"stdout":"","stderr":"","cached":false,"stats":null}\n'


def test_the_client_hands_over_each_line_and_returns_the_done_lines_answer(streaming):
    url = streaming(COMPILED, b'{"event":"test","index":0,"verdict":"AC"}\n', b'{"event":"done","verdict":"AC","tests":[]}\n')
    heard = []
    answer = judgecli.Api(url, None).judge({}, {}, heard.append)
    assert [line["event"] for line in heard] == ["compile", "test"] and answer == {"verdict": "AC", "tests": []}


@pytest.mark.parametrize(
    "lines, words",
    [
        ((COMPILED, b'{"event":"error","error":"internal"}\n'), "POST /judge failed on the server after the build (internal): its log says why; retry"),
        ((COMPILED,), "the stream ended before its answer"),
        ((b"<html>\n",), "a line that is not an event"),
    ],
)
def test_a_stream_that_ends_badly_is_a_usage_error_that_says_so(streaming, lines, words):
    with pytest.raises(UsageError, match=re.escape(words)):
        judgecli.Api(streaming(*lines), None).judge({}, {})
