"""ruby through the real HTTP API and the real sandbox: langs/ruby's harness runs the solution's
`solution` method per argument list and prints the harness protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kilntest import Server

SLUG = "ruby"
EXAMPLE = (Path(__file__).parent / "examples" / SLUG / "solution.rb").read_text()
AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'


@pytest.fixture(scope="module")
def server():
    if not Path("/usr/bin/ruby").exists():
        pytest.skip("ruby: /usr/bin/ruby is not installed: run langs/ruby/install.sh")
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
    solution = "def solution(a, b)\n  a / b\nend\n"
    got = items(run(server, solution, '{"arguments": [[7, 2], [1, 0], [9, 3]]}'))
    assert [(i["type"], i["value"]) for i in got] == [
        ("result", 3),
        ("error", "ZeroDivisionError: divided by 0"),
        ("result", 3),
    ]


def test_output_is_captured_per_call(server):
    solution = "puts 'loading'\ndef solution(n)\n  puts \"call #{n}\"\n  system('echo child')\n  n\nend\n"
    got = items(run(server, solution, '{"arguments": [[1], [2]]}'))
    assert [(i["type"], i.get("output"), i["value"]) for i in got] == [
        ("output", None, "loading\n"),
        ("result", "call 1\nchild\n", 1),
        ("result", "call 2\nchild\n", 2),
    ]


def test_an_infinite_loop_times_out(server):
    body = run(server, "def solution\n  loop {}\nend\n", '{"arguments": [[]]}', timeout="2s")
    assert (body["stats"]["outcome"], body["exit_code"]) == ("timed_out", None)


def test_the_original_runner_payload_runs_as_a_plain_program(server):
    solution = "require 'json'\ndata = JSON.parse(File.read('asserts.json'))\nputs data['a'] + data['b']\n"
    body = run(server, solution, '{"a": 2, "b": 3}')
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, "5\n", "")


def test_plain_program_errors_and_status(server):
    body = run(server, "puts 'before'\nraise ArgumentError, 'boom'\n")
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"] == "solution.rb:2:in `<main>': boom (ArgumentError)\n"
    body = run(server, "def broken(\n")
    assert body["exit_code"] == 1 and "syntax error" in body["stderr"]


def test_stdin_reaches_a_plain_program(server):
    body = run(server, "puts $stdin.read.upcase\n", stdin="kiln\n")
    assert (body["exit_code"], body["stdout"]) == (0, "KILN\n")


def test_stdlib_and_gems_load_in_the_sandbox(server):
    solution = "require 'set'\nrequire 'prime'\nrequire 'bigdecimal'\ndef solution(n)\n  [Prime.first(n), Set[3, 1].sort, BigDecimal('0.1').to_s]\nend\n"
    got = items(run(server, solution, '{"arguments": [[4]]}'))
    assert got[0]["value"] == [[2, 3, 5, 7], [1, 3], "0.1e0"], got
