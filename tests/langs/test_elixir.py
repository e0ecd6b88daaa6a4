"""elixir through the real HTTP API and the real sandbox: langs/elixir's harness (compiled into
langs/elixir/ebin by install.sh) calls Solution.solution/N per argument list and prints the
harness protocol."""

from __future__ import annotations

import pytest

import langcase
from kilntest import REPO

AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'
ELIXIR = langcase.Lang("elixir", timed=True)


@pytest.fixture(scope="module")
def server():
    yield from ELIXIR.serve(langcase.missing(
        "run langs/elixir/install.sh",
        paths=(
            ("/usr/bin/elixir", "/usr/bin/elixir is not installed"),
            (REPO / "langs" / "elixir" / "ebin" / "Elixir.KilnHarness.beam", "langs/elixir/ebin is not built"),
        ),
    ))


def test_a_plus_b_with_the_example_solution(server):
    langcase.assert_example_a_plus_b(ELIXIR, server, "solution.exs", AB)


def test_a_runtime_error_in_one_call_leaves_the_others(server):
    solution = "defmodule Solution do\n  def solution(a, b), do: div(a, b)\nend\n"
    langcase.assert_division_by_zero_fails_alone(ELIXIR, server, solution, "ArithmeticError: bad argument in arithmetic expression")


def test_output_is_captured_per_call(server):
    solution = 'IO.puts("loading")\ndefmodule Solution do\n  def solution(n) do\n    IO.puts("call #{n}")\n    n\n  end\nend\n'
    langcase.assert_output_per_call(ELIXIR, server, solution)


def test_an_infinite_loop_times_out(server):
    solution = "defmodule Solution do\n  def solution, do: solution()\nend\n"
    langcase.assert_timed_out(ELIXIR.run(server, solution, asserts='{"arguments": [[]]}', timeout="2s"))


def test_the_original_runner_payload_runs_as_a_plain_program(server):
    solution = '[_, a, b] = Regex.run(~r/"a":\\s*(\\d+),\\s*"b":\\s*(\\d+)/, File.read!("asserts.json"))\nIO.puts(String.to_integer(a) + String.to_integer(b))\n'
    langcase.assert_runner_payload_runs(ELIXIR, server, solution)


def test_plain_program_errors_and_status(server):
    body = ELIXIR.run(server, 'IO.puts("before")\nraise ArgumentError, "boom"\n')
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"].startswith("** (ArgumentError) boom\n    solution.exs:2: (file)\n")
    body = ELIXIR.run(server, "defmodule X do\n  def (\n")
    assert body["exit_code"] == 1 and "TokenMissingError" in body["stderr"]
    assert ELIXIR.run(server, "System.halt(3)\n")["exit_code"] == 3


def test_stdin_reaches_a_plain_program(server):
    langcase.assert_stdin_reaches_a_plain_program(ELIXIR, server, "IO.write(String.upcase(IO.read(:stdio, :eof)))\n")


def test_the_beam_runs_with_the_pinned_flags(server):
    solution = "defmodule Solution do\n  def solution, do: [System.schedulers_online(), :erlang.system_info(:dirty_io_schedulers), Node.alive?()]\nend\n"
    got = ELIXIR.items(ELIXIR.run(server, solution, asserts='{"arguments": [[]]}'))
    assert got[0]["value"] == [1, 1, False]
