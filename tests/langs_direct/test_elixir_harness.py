"""langs/elixir: its test command and check/harness.exs + harness.ex, run directly (no kiln, no
sandbox)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import harnesscase
from harnesscase import INVALID_JSON, NOT_THE_SHAPE, assert_reports, report

ELIXIR = "/usr/bin/elixir"
ADD = "defmodule Solution do\n  def solution(a, b), do: a + b\nend\n"

# The original runner's payload would need a JSON library (Debian's Elixir has none): this one
# reads asserts.json itself all the same.
RUNNER_PAYLOAD = """[_, a, b] = Regex.run(~r/"a":\\s*(\\d+),\\s*"b":\\s*(\\d+)/, File.read!("asserts.json"))
IO.puts(String.to_integer(a) + String.to_integer(b))
"""


@pytest.fixture(scope="session")
def elixir_install():
    """Runs langs/elixir/install.sh once per session (it compiles the harness into ebin/)."""
    return harnesscase.install("elixir", ELIXIR)


@pytest.fixture(params=["test", "prestart"])
def ex(tmp_path, elixir_install, request):
    """Every case twice: the test command, and the prestart command released by kiln's go byte."""
    if elixir_install is None:
        pytest.skip(f"{ELIXIR} is not installed: run langs/elixir/install.sh")
    assert elixir_install.returncode == 0, elixir_install.stderr
    return harnesscase.Workspace(harnesscase.copy_workspace("elixir", tmp_path), "solution.exs", ELIXIR, prestarted=request.param == "prestart")


FLAGS = "+S 1:1 +SDcpu 1:1 +SDio 1 +A 1"


def test_test_command_is_one_simple_line(ex):
    assert ex.command.startswith("cd check && ERL_CRASH_DUMP_SECONDS=0 ")
    flag = " --prestarted" if ex.prestarted else ""
    assert ex.command.endswith(f" -pa ../ebin -r harness.exs solution.exs{flag}\n")
    assert FLAGS in ex.command
    harnesscase.assert_simple_test_target(ex)


def test_the_command_is_what_the_elixir_script_would_run(ex):
    """erlexec is called as /usr/bin/elixir then erl would call it (their dry run says how)."""
    dry = subprocess.run(
        [ELIXIR, "--erl", FLAGS, "-pa", "../ebin", "-r", "harness.exs", "solution.exs"],
        env={"PATH": harnesscase.SANDBOX_PATH, "ELIXIR_CLI_DRY_RUN": "1"}, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert dry[0] == "erl"
    erts = re.search(r"BINDIR=(\S+) ", ex.command).group(1)
    words = ex.command.split("exec ", 1)[1].split()
    if ex.prestarted:
        assert words.pop() == "--prestarted"
    assert words[0] == f"{erts}/erlexec"
    assert words[1:] == [str(Path(w).resolve()) if w.startswith("/") else w for w in dry[1:]]
    assert f"ROOTDIR={Path('/usr/bin/erl').resolve().parent.parent} BINDIR={erts} EMU=beam PROGNAME=erl exec " in ex.command


def test_the_harness_is_precompiled(ex):
    assert (ex.root / "ebin" / "Elixir.KilnHarness.beam").is_file()


def test_a_plus_b_over_several_argument_lists(ex):
    harnesscase.assert_a_plus_b(ex, ADD)


def test_an_error_in_one_call_does_not_stop_the_others(ex):
    res = ex.run("defmodule Solution do\n  def solution(a, b), do: div(a, b)\nend\n", '{"arguments": [[7, 2], [1, 0], [9, 3]]}')
    assert_reports(res, ("result", 3), ("error", "ArithmeticError: bad argument in arithmetic expression"), ("result", 3))


def test_error_messages(ex):
    solution = (
        "defmodule Custom do\n  defexception message: \"default\"\nend\n"
        "defmodule Solution do\n"
        "  def solution(\"key\"), do: Map.fetch!(%{}, \"missing\")\n"
        "  def solution(\"custom\"), do: raise(Custom, \"mine\")\n"
        "  def solution(\"raise\"), do: raise(\"plain\")\n"
        "  def solution(\"throw\"), do: throw(:up)\n"
        "  def solution(\"exit\"), do: exit(:bye)\n"
        "  def solution(\"erlang\"), do: :erlang.error(:badarg)\n"
        "  def solution(\"linked\") do\n"
        "    spawn_link(fn -> exit(:crash) end)\n"
        "    Process.sleep(50)\n"
        "    :survived\n"
        "  end\n"
        "end\n"
    )
    kinds = ["key", "custom", "raise", "throw", "exit", "erlang", "linked", "other"]
    res = ex.run(solution, json.dumps({"arguments": [[k] for k in kinds]}))
    assert res.returncode == 0, res.stderr
    assert [(i["type"], i["value"]) for i in res.items()] == [
        ("error", 'KeyError: key "missing" not found in: %{}'),
        ("error", "Custom: mine"),
        ("error", "RuntimeError: plain"),
        ("error", "throw: :up"),
        ("error", "exit: :bye"),
        ("error", "ArgumentError: argument error"),
        ("result", "survived"),
        ("error", 'FunctionClauseError: no function clause matching in Solution.solution/1'),
    ]


def test_wrong_arity_is_an_error_of_the_call(ex):
    res = ex.run(ADD, '{"arguments": [[1], [1, 2]]}')
    assert [(i["type"], i["value"]) for i in res.items()] == [
        ("error", "UndefinedFunctionError: function Solution.solution/1 is undefined or private"),
        ("result", 3),
    ]


def test_output_is_captured_per_call(ex):
    solution = (
        "defmodule Solution do\n"
        "  def solution(n) do\n"
        "    IO.puts(\"puts #{n}\")\n"
        "    IO.write(\"write #{n}\\n\")\n"
        "    IO.inspect(%{n: n})\n"
        "    :io.format(\"format ~p~n\", [n])\n"
        "    task = Task.async(fn -> IO.puts(\"from a task\") end)\n"
        "    Task.await(task)\n"
        "    if n == 2, do: raise(\"after printing\")\n"
        "    n\n"
        "  end\n"
        "end\n"
    )
    harnesscase.assert_output_per_call(ex, solution, [f"puts {n}\nwrite {n}\n%{{n: {n}}}\nformat {n}\nfrom a task\n" for n in (1, 2, 3)])


def test_stderr_is_left_alone(ex):
    harnesscase.assert_stderr_left_alone(ex, "defmodule Solution do\n  def solution do\n    IO.puts(:stderr, \"to stderr\")\n    1\n  end\nend\n")


def test_output_while_loading_comes_first(ex):
    harnesscase.assert_loading_output_comes_first(ex, 'IO.puts("loading")\nIO.puts("twice")\n' + ADD, "loading\ntwice\n")


def test_no_output_item_without_output_while_loading(ex):
    harnesscase.assert_no_output_item_without_output_while_loading(ex, ADD)


def test_values_are_serialised_naturally(ex):
    solution = (
        "defmodule Point do\n  defstruct x: 1, y: 2\nend\n"
        "defmodule Solution do\n"
        "  def solution(kind) do\n"
        "    %{\n"
        "      \"nil\" => nil, \"bool\" => true, \"atom\" => :sym, \"map\" => %{:a => [1, %{2 => 3.5}]},\n"
        "      \"tuple\" => {1, {2, \"x\"}}, \"set\" => MapSet.new([3, 1, 2]), \"range\" => 1..3,\n"
        "      \"text\" => \"привет \\\"q\\\"\", \"big\" => Integer.pow(2, 100), \"struct\" => %Point{},\n"
        "      \"date\" => ~D[2024-01-02], \"charlist\" => 'ab', \"binary\" => <<255, 111, 107>>,\n"
        "      \"pid\" => self(), \"float\" => 1.0e20, \"keyword\" => [a: 1]\n"
        "    }[kind]\n"
        "  end\n"
        "end\n"
    )
    kinds = ["nil", "bool", "atom", "map", "tuple", "set", "range", "text", "big", "struct", "date", "charlist", "binary", "pid", "float", "keyword"]
    res = ex.run(solution, json.dumps({"arguments": [[k] for k in kinds]}))
    assert res.returncode == 0, res.stderr
    values = res.values()
    assert values[:13] == [
        None, True, "sym", {"a": [1, {"2": 3.5}]}, [1, [2, "x"]], [1, 2, 3], [1, 2, 3], 'привет "q"', 2**100,
        {"x": 1, "y": 2}, "2024-01-02", [97, 98], "\ufffdok",
    ]
    assert values[13].startswith("#PID<")
    assert values[14:] == [1.0e20, [["a", 1]]]
    assert '"value":"привет \\"q\\""' in res.stdout  # UTF-8, not \u escapes
    assert '"value":1267650600228229401496703205376,' in res.stdout  # exact


def test_arguments_are_decoded_as_json(ex):
    solution = "defmodule Solution do\n  def solution(x), do: [x, inspect(x)]\nend\n"
    args = [[{"b": [1, 2.5, -0.5e-3, True, None], "a": "\u00e9\U0001f600\n"}], [123456789012345678901234567890], [[]], [{}]]
    res = ex.run(solution, json.dumps({"arguments": args}))
    items = res.items()
    assert [i["value"][0] for i in items] == [a[0] for a in args]
    assert items[0]["value"][1] == '%{"a" => "é😀\\n", "b" => [1, 2.5, -0.0005, true, nil]}'


def test_a_top_level_module_with_another_name_is_called_too(ex):
    res = ex.run("defmodule Helper do\n  def twice(x), do: 2 * x\nend\ndefmodule MyAnswer do\n  def solution(a), do: Helper.twice(a)\nend\n", '{"arguments": [[21]]}')
    assert res.values() == [42]


def test_state_is_kept_between_calls(ex):
    solution = "defmodule Solution do\n  def solution do\n    n = (Process.get(:n) || 0) + 1\n    Process.put(:n, n)\n    n\n  end\nend\n"
    assert ex.run(solution, '{"arguments": [[], [], []]}').values() == [1, 2, 3]


def test_plain_mode_without_asserts_json(ex):
    res = ex.run('IO.inspect({"hello", System.argv(), Path.basename(__ENV__.file)})\n')
    assert res.outcome == (0, '{"hello", [], "solution.exs"}\n', "")


@pytest.mark.parametrize("asserts", NOT_THE_SHAPE)
def test_plain_mode_when_asserts_are_not_of_the_shape(ex, asserts):
    assert ex.run(ADD + 'IO.puts("plain")\n', asserts).outcome == (0, "plain\n", "")


@pytest.mark.parametrize("asserts", [*INVALID_JSON, '{"arguments": [[01]]}'])
def test_plain_mode_when_asserts_are_invalid_json(ex, asserts):
    assert ex.run(ADD + 'IO.puts("plain")\n', asserts).outcome == (0, "plain\n", "")


def test_the_original_runner_payload(ex):
    harnesscase.assert_runner_payload_runs(ex, RUNNER_PAYLOAD)


def test_plain_mode_is_the_bare_run(ex):
    solution = (
        'IO.inspect({System.argv(), File.cwd!() == __DIR__, Path.basename(__ENV__.file)})\n'
        'IO.write(String.upcase(IO.read(:stdio, :eof)))\n'
        'System.at_exit(fn status -> IO.puts("at exit #{status}") end)\n'
        'IO.puts(:stderr, "err")\n'
        'System.stop(4)\n'
        'Process.sleep(:infinity)\n'
    )
    res = ex.run(solution, '{"a": 1}', stdin="some input\n")
    assert res.outcome == ex.bare(stdin="some input\n").outcome
    assert res.returncode == 4 and res.stdout.startswith('{[], true, "solution.exs"}\nSOME INPUT\n')


def test_no_solution_module_passes_output_and_status_through(ex):
    res = ex.run('IO.puts("no module here")\nexit({:shutdown, 3})\n', '{"arguments": [[1, 2]]}')
    assert res.outcome == (3, "no module here\n", "")
    # System.halt/1 ends the VM on the spot: the output of loading, held by the harness, is lost
    assert ex.run('IO.puts("no module here")\nSystem.halt(3)\n', '{"arguments": [[1, 2]]}').outcome == (3, "", "")


def test_no_solution_module_runs_to_its_end(ex):
    solution = 'System.at_exit(fn _ -> IO.puts("at exit") end)\ndefmodule Other do\n  def f, do: 1\nend\nIO.puts("done")\n'
    assert ex.run(solution, '{"arguments": [[1, 2]]}').outcome == (0, "done\nat exit\n", "")


def test_an_error_while_loading_passes_through_as_bare(ex):
    solution = 'IO.puts("before")\n' + ADD + 'raise "while loading"\n'
    res = ex.run(solution, '{"arguments": [[1, 2]]}')
    bare = ex.bare()
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert res.stderr.startswith("** (RuntimeError) while loading\n    solution.exs:5: (file)\n")
    assert "harness" not in res.stderr
    assert res.outcome == bare.outcome


def test_uncaught_exception_in_plain_mode(ex):
    solution = 'defmodule M do\n  def f, do: raise(ArgumentError, "boom")\nend\nIO.puts("before")\nM.f()\n'
    res = ex.run(solution)
    bare = ex.bare()
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert res.stderr.startswith("** (ArgumentError) boom\n    solution.exs:2: M.f/0\n")
    assert res.outcome == bare.outcome


@pytest.mark.parametrize("asserts", [None, '{"arguments": [[1, 2]]}'], ids=["plain", "harness"])
def test_syntax_error_is_reported_as_bare(ex, asserts):
    res = ex.run("defmodule Solution do\n  def solution(a, b do\nend\n", asserts)
    bare = ex.bare()
    assert res.returncode == 1 and "TokenMissingError" in res.stderr and "harness" not in res.stderr
    assert res.outcome == bare.outcome


def test_exit_status_in_plain_mode(ex):
    assert ex.run("System.halt(3)\n").returncode == 3
    res = ex.run('exit({:shutdown, 5})\n')
    assert res.returncode == 5


def test_late_output_cannot_follow_the_report(ex):
    solution = (
        'System.at_exit(fn _ -> IO.puts("at exit") end)\n'
        "defmodule Solution do\n"
        "  def solution do\n"
        '    spawn(fn -> Process.sleep(200); IO.puts("late") end)\n'
        "    1\n"
        "  end\n"
        "end\n"
    )
    harnesscase.assert_late_output_cannot_follow_the_report(ex, solution)


def test_nothing_is_written_to_the_workspace(ex):
    harnesscase.assert_nothing_is_written_to_the_workspace(ex, ADD)


def test_without_the_compiled_harness_it_still_works(ex):
    for beam in (ex.root / "ebin").glob("*.beam"):
        beam.unlink()
    assert ex.run(ADD, '{"arguments": [[1, 2]]}').masked() == report(("result", 3))


def test_the_solution_sees_the_argv_of_the_test_command(ex):
    assert ex.run("IO.inspect(System.argv())\n").outcome == (0, "[]\n", "")
