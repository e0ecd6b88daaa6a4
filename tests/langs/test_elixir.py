"""elixir through the real HTTP API and the real sandbox: langs/elixir's harness (compiled into
langs/elixir/ebin by install.sh) calls Solution.solution/N per argument list and prints the
harness protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import pytest

import langcase

pytestmark = langcase.only("elixir")
ELIXIR = langcase.LANGS["elixir"]


def test_plain_program_errors_and_status(lang_server):
    body = ELIXIR.run(lang_server, 'IO.puts("before")\nraise ArgumentError, "boom"\n')
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"].startswith("** (ArgumentError) boom\n    solution.exs:2: (file)\n")
    body = ELIXIR.run(lang_server, "defmodule X do\n  def (\n")
    assert body["exit_code"] == 1 and "TokenMissingError" in body["stderr"]
    assert ELIXIR.run(lang_server, "System.halt(3)\n")["exit_code"] == 3


def test_the_beam_runs_with_the_pinned_flags(lang_server):
    solution = "defmodule Solution do\n  def solution, do: [System.schedulers_online(), :erlang.system_info(:dirty_io_schedulers), Node.alive?()]\nend\n"
    got = ELIXIR.items(ELIXIR.run(lang_server, solution, asserts='{"arguments": [[]]}'))
    assert got[0]["value"] == [1, 1, False]


# each prints "loading" while the harness loads it, then its load ends abruptly
ABRUPT_LOADS = {
    "halt": ('IO.puts("loading")\nSystem.halt(3)\n', "exited", 3),
    "kill": ('IO.puts("loading")\nSystem.cmd("sh", ["-c", "kill -9 " <> System.pid()])\n', "signaled", 137),
    "timeout": ('IO.puts("loading")\nProcess.sleep(:infinity)\n', "timed_out", None),
    "oom": ('IO.puts("loading")\nx = String.duplicate("x", 400_000_000)\nIO.puts(byte_size(x))\n', "out_of_memory", 137),
}


@pytest.mark.parametrize("way", list(ABRUPT_LOADS))
def test_what_loading_printed_reaches_stdout_however_the_load_ends(lang_server, way):
    """With asserts.json in harness shape: the harness holds what loading prints for its report
    (kiln/runtime.py HELD_STDOUT), and a load that ends abruptly still passes it on."""
    solution, outcome, exit_code = ABRUPT_LOADS[way]
    body = ELIXIR.run(lang_server, solution + "defmodule Solution do\n  def solution(n), do: n\nend\n", asserts={"arguments": [[1]]}, timeout="5s", limits={"memory": "192m"})
    assert (body["stdout"], body["stats"]["outcome"], body["exit_code"]) == ("loading\n", outcome, exit_code), body
