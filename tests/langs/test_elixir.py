"""elixir through the real HTTP API and the real sandbox: langs/elixir's harness (compiled into
langs/elixir/ebin by install.sh) calls Solution.solution/N per argument list and prints the
harness protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kilntest import REPO, Server

SLUG = "elixir"
EXAMPLE = (Path(__file__).parent / "examples" / SLUG / "solution.exs").read_text()
AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'


@pytest.fixture(scope="module")
def server():
    if not Path("/usr/bin/elixir").exists():
        pytest.skip("elixir: /usr/bin/elixir is not installed: run langs/elixir/install.sh")
    if not (REPO / "langs" / "elixir" / "ebin" / "Elixir.KilnHarness.beam").is_file():
        pytest.skip("elixir: langs/elixir/ebin is not built: run langs/elixir/install.sh")
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
    solution = "defmodule Solution do\n  def solution(a, b), do: div(a, b)\nend\n"
    got = items(run(server, solution, '{"arguments": [[7, 2], [1, 0], [9, 3]]}'))
    assert [(i["type"], i["value"]) for i in got] == [
        ("result", 3),
        ("error", "ArithmeticError: bad argument in arithmetic expression"),
        ("result", 3),
    ]


def test_output_is_captured_per_call(server):
    solution = 'IO.puts("loading")\ndefmodule Solution do\n  def solution(n) do\n    IO.puts("call #{n}")\n    n\n  end\nend\n'
    got = items(run(server, solution, '{"arguments": [[1], [2]]}'))
    assert [(i["type"], i.get("output"), i["value"]) for i in got] == [
        ("output", None, "loading\n"),
        ("result", "call 1\n", 1),
        ("result", "call 2\n", 2),
    ]


def test_an_infinite_loop_times_out(server):
    solution = "defmodule Solution do\n  def solution, do: solution()\nend\n"
    body = run(server, solution, '{"arguments": [[]]}', timeout="2s")
    assert (body["stats"]["outcome"], body["exit_code"]) == ("timed_out", None)


def test_the_original_runner_payload_runs_as_a_plain_program(server):
    solution = '[_, a, b] = Regex.run(~r/"a":\\s*(\\d+),\\s*"b":\\s*(\\d+)/, File.read!("asserts.json"))\nIO.puts(String.to_integer(a) + String.to_integer(b))\n'
    body = run(server, solution, '{"a": 2, "b": 3}')
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, "5\n", "")


def test_plain_program_errors_and_status(server):
    body = run(server, 'IO.puts("before")\nraise ArgumentError, "boom"\n')
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"].startswith("** (ArgumentError) boom\n    solution.exs:2: (file)\n")
    body = run(server, "defmodule X do\n  def (\n")
    assert body["exit_code"] == 1 and "TokenMissingError" in body["stderr"]
    assert run(server, "System.halt(3)\n")["exit_code"] == 3


def test_stdin_reaches_a_plain_program(server):
    body = run(server, "IO.write(String.upcase(IO.read(:stdio, :eof)))\n", stdin="kiln\n")
    assert (body["exit_code"], body["stdout"]) == (0, "KILN\n")


def test_the_beam_runs_with_the_pinned_flags(server):
    solution = "defmodule Solution do\n  def solution, do: [System.schedulers_online(), :erlang.system_info(:dirty_io_schedulers), Node.alive?()]\nend\n"
    got = items(run(server, solution, '{"arguments": [[]]}'))
    assert got[0]["value"] == [1, 1, False]
