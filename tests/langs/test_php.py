"""php through the real HTTP API and the real sandbox: langs/php's harness (auto_prepend_file /
auto_append_file around solution.php) calls the solution's `solution` function per argument list
and prints the harness protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kilntest import Server

SLUG = "php"
EXAMPLE = (Path(__file__).parent / "examples" / SLUG / "solution.php").read_text()
AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'


@pytest.fixture(scope="module")
def server():
    if not Path("/usr/bin/php").exists():
        pytest.skip("php: /usr/bin/php is not installed: run langs/php/install.sh")
    instance = Server({"RUN_LANGS": SLUG, "RUN_CONCURRENCY": "2"}).wait_ready()
    yield instance
    instance.stop()


def run(server, solution: str, asserts: str | None = None, timeout: str = "30s", **fields) -> dict:
    response = server.run(lang_slug=SLUG, solution_text=solution, asserts=asserts, timeout=timeout, **fields)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert (body["exit_code"], body["stats"]["outcome"]) == (0, "exited"), body
    assert body["stdout"].endswith("\n") and body["stdout"].count("\n") == 1, body["stdout"]
    got = json.loads(body["stdout"])
    for item in got:
        if item["type"] != "output":
            assert len(item["time"].split(".")[1]) == 7 and float(item["time"]) >= 0
    return got


def test_a_plus_b_with_the_example_solution(server):
    body = run(server, EXAMPLE, AB)
    assert body["stderr"] == ""
    assert [(i["type"], i["value"], i["output"]) for i in items(body)] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 7, "adding 10 and -3\n"),
        ("result", 0, "adding 0 and 0\n"),
        ("result", 2.75, "adding 2.5 and 0.25\n"),
    ]


def test_a_runtime_error_in_one_call_leaves_the_others(server):
    solution = "<?php\nfunction solution($a, $b) { return intdiv($a, $b); }\n"
    got = items(run(server, solution, '{"arguments": [[7, 2], [1, 0], [9, 3]]}'))
    assert [(i["type"], i["value"]) for i in got] == [
        ("result", 3),
        ("error", "DivisionByZeroError: Division by zero"),
        ("result", 3),
    ]


def test_exit_in_a_call_is_an_error_of_that_call(server):
    solution = "<?php\nfunction solution($n) { if ($n === 2) exit(1); return $n; }\n"
    got = items(run(server, solution, '{"arguments": [[1], [2], [3]]}'))
    assert [(i["type"], i["value"]) for i in got] == [("result", 1), ("error", "exit"), ("result", 3)]


def test_output_is_captured_per_call(server):
    solution = "<?php\necho \"loading\\n\";\nfunction solution($n) {\n    echo \"call $n\\n\";\n    fwrite(STDOUT, \"stdout\\n\");\n    system('echo child');\n    return $n;\n}\n"
    got = items(run(server, solution, '{"arguments": [[1], [2]]}'))
    assert [(i["type"], i.get("output"), i["value"]) for i in got] == [
        ("output", None, "loading\n"),
        ("result", "call 1\nstdout\nchild\n", 1),
        ("result", "call 2\nstdout\nchild\n", 2),
    ]


def test_an_infinite_loop_times_out(server):
    body = run(server, "<?php\nfunction solution() { while (true) {} }\n", '{"arguments": [[]]}', timeout="2s")
    assert (body["stats"]["outcome"], body["exit_code"]) == ("timed_out", None)


def test_the_original_runner_payload_runs_as_a_plain_program(server):
    solution = "<?php\n$data = json_decode(file_get_contents('asserts.json'), true);\necho $data['a'] + $data['b'], \"\\n\";\n"
    body = run(server, solution, '{"a": 2, "b": 3}')
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, "5\n", "")


def test_plain_program_errors_and_status(server):
    body = run(server, "<?php\necho \"before\\n\";\nthrow new Exception('boom');\n")
    assert (body["exit_code"], body["stdout"]) == (255, "before\n")
    assert body["stderr"].startswith("PHP Fatal error:  Uncaught Exception: boom in /sandbox/check/solution.php:3\n")
    body = run(server, "<?php\nfunction broken( {\n")
    assert body["exit_code"] == 255 and "PHP Parse error:" in body["stderr"]
    assert run(server, "<?php\nexit(3);\n")["exit_code"] == 3


def test_stdin_reaches_a_plain_program(server):
    body = run(server, "<?php\necho strtoupper(stream_get_contents(STDIN));\n", stdin="kiln\n")
    assert (body["exit_code"], body["stdout"]) == (0, "KILN\n")


def test_the_php_ini_and_extensions_are_there(server):
    solution = "<?php\nfunction solution($s) {\n    return [mb_strtoupper($s), ctype_digit('123'), ini_get('memory_limit'), php_ini_loaded_file() !== false];\n}\n"
    got = items(run(server, solution, '{"arguments": [["привет"]]}'))
    assert got[0]["value"] == ["ПРИВЕТ", True, "-1", True], got
