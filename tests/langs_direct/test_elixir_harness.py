"""langs/elixir: its test command and check/harness.exs + harness.ex, run directly (no kiln, no
sandbox)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import harnesscase
from harnesscase import report

ELIXIR = "/usr/bin/elixir"
ADD = harnesscase.HARNESSES["elixir"].add


@pytest.fixture(params=["test", "prestart"])
def ex(tmp_path, request) -> harnesscase.Workspace:
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.harness_workspace("elixir", tmp_path, prestarted=request.param == "prestart")


FLAGS = "+S 1:1 +SDcpu 1:1 +SDio 1 +A 1"


def test_the_elixir_test_command_runs_the_precompiled_harness_on_one_scheduler(ex):
    """Its one simple line (test_every_harness.py) with the flags the sandbox needs."""
    assert ex.command.startswith("cd check && ERL_CRASH_DUMP_SECONDS=0 ")
    flag = " --prestarted" if ex.prestarted else ""
    assert ex.command.endswith(f" -pa ../ebin -r harness.exs solution.exs{flag}\n")
    assert FLAGS in ex.command


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


def test_wrong_arity_is_an_error_of_the_call(ex):
    res = ex.run(ADD, '{"arguments": [[1], [1, 2]]}')
    assert [(i["type"], i["value"]) for i in res.items()] == [
        ("error", "UndefinedFunctionError: function Solution.solution/1 is undefined or private"),
        ("result", 3),
    ]


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


def test_without_the_compiled_harness_it_still_works(ex):
    for beam in (ex.root / "ebin").glob("*.beam"):
        beam.unlink()
    assert ex.run(ADD, '{"arguments": [[1, 2]]}').masked() == report(("result", 3))


def test_the_solution_sees_the_argv_of_the_test_command(ex):
    assert ex.run("IO.inspect(System.argv())\n").outcome == (0, "[]\n", "")
