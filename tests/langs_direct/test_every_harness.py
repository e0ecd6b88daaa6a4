"""The behaviours every harness has, as tables: one row a language (test ids:
test_x[test-<slug>] and [prestart-<slug>]), what it sends and what comes back kept as data, one
test function a table; each runs the workspace's harness directly (no kiln, no sandbox) twice: by
the test command, and by the prestart command released by kiln's go byte (a prestarted slot must
behave exactly as a plain one). What each harness language is: harnesscase.HARNESSES; a
language's own tests: test_<slug>_harness.py.

The tables (a language without a row does not have the test): the test command; a+b; an error
in one call; error messages; each call's output; stderr; output while loading; plain mode (no
asserts, asserts not of the shape, not JSON, the original runner's payload); no solution; exit
statuses; late output; the workspace left alone; state between calls; a prestarted harness given
up.

Over 400 lines: what makes it long is the tables' rows, each language's snippets, not logic."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from harnesscase import AB, HARNESSES, INVALID_JSON, NOT_THE_SHAPE, Workspace, assert_reports, go_on_fd_3, harness_workspace, report


def rows(table) -> pytest.MarkDecorator:
    """Run the test for each language of the table."""
    return pytest.mark.parametrize("slug", list(table))


@pytest.fixture(params=["test", "prestart"])
def ws(slug: str, tmp_path: Path, request) -> Workspace:
    """Every case twice: the test command, and the prestart command released by kiln's go byte."""
    return harness_workspace(slug, tmp_path, prestarted=request.param == "prestart")


# -- the test command ---------------------------------------------------------------------------

COMMANDS = {  # (the test command, the prestart command); elixir's: test_elixir_harness.py
    "elixir": None,
    "js": ("/usr/bin/node check/harness.js\n", "/usr/bin/node check/harness.js --prestarted\n"),
    "php": (
        "cd check && exec /usr/bin/php -d auto_prepend_file=./prepend.php -d auto_append_file=./append.php solution.php\n",
        "cd check && exec /usr/bin/php -d auto_prepend_file=./prepend.php -d auto_append_file=./append.php prestart.php\n",
    ),
    "python": ("/usr/bin/python3 -B check/harness.py\n", "/usr/bin/python3 -B check/harness.py --prestarted\n"),
    "ruby": ("cd check && exec /usr/bin/ruby -r./harness.rb solution.rb\n", "cd check && exec /usr/bin/ruby prestart.rb\n"),
    "ts": ("/usr/bin/node check/harness.js\n", "/usr/bin/node check/harness.js --prestarted\n"),
}


@rows(COMMANDS)
def test_test_command_is_one_simple_line(slug, ws):
    """The Makefile's `test` target: phony, no prerequisites, a one-line command that names no
    absolute path of the workspace."""
    if COMMANDS[slug] is not None:
        assert ws.command == COMMANDS[slug][ws.prestarted]
    assert ws.command.endswith("\n") and ws.command.count("\n") == 1, ws.command
    makefile = (ws.root / "Makefile").read_text()
    assert ".PHONY: test" in makefile
    assert re.search(r"^test:\s*$", makefile, re.M), "test must have no prerequisites"
    assert "CURDIR" not in makefile and str(ws.root) not in ws.command


# -- calls --------------------------------------------------------------------------------------


@rows(HARNESSES)
def test_a_plus_b_over_several_argument_lists(slug, ws):
    """The language's a+b over AB: a result a call, nothing on stderr, each call under a second."""
    res = ws.run(HARNESSES[slug].add, AB)
    assert_reports(res, ("result", 3), ("result", 7), ("result", 0), ("result", 2.75))
    assert res.stderr == ""
    for item in res.items():
        assert float(item["time"]) < 1


ONE_CALL_FAILS = {  # (solution, the error of its second call over DIVISIONS or JS_DIVISIONS)
    "elixir": ("defmodule Solution do\n  def solution(a, b), do: div(a, b)\nend\n", "ArithmeticError: bad argument in arithmetic expression"),
    "js": ("module.exports = (a, b) => { if (b === 0) throw new RangeError('b is zero'); return a / b; };\n", "b is zero"),
    "php": ("<?php\nfunction solution($a, $b) { return intdiv($a, $b); }\n", "DivisionByZeroError: Division by zero"),
    "python": ("def solution(a, b):\n    return a // b\n", "ZeroDivisionError: integer division or modulo by zero"),
    "ruby": ("def solution(a, b)\n  a / b\nend\n", "ZeroDivisionError: divided by 0"),
    "ts": ("export default (a: number, b: number): number => {\n  if (b === 0) throw new RangeError('b is zero');\n  return a / b;\n};\n", "b is zero"),
}
DIVISIONS = '{"arguments": [[7, 2], [1, 0], [9, 3]]}'  # integer division: 3, an error, 3
JS_DIVISIONS = '{"arguments": [[8, 2], [1, 0], [9, 3]]}'  # a / b: 4, an error, 3


@rows(ONE_CALL_FAILS)
def test_an_error_in_one_call_does_not_stop_the_others(slug, ws):
    solution, error = ONE_CALL_FAILS[slug]
    first = 4 if slug in ("js", "ts") else 3
    res = ws.run(solution, JS_DIVISIONS if first == 4 else DIVISIONS)
    assert_reports(res, ("result", first), ("error", error), ("result", 3))


@dataclass(frozen=True)
class Errors:
    """solution(kind) fails in each way of `kinds`; `said`: each call's (type, value)."""

    solution: str
    kinds: list
    said: list


ERROR_MESSAGES = {
    "elixir": Errors(
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
        "end\n",
        ["key", "custom", "raise", "throw", "exit", "erlang", "linked", "other"],
        [
            ("error", 'KeyError: key "missing" not found in: %{}'),
            ("error", "Custom: mine"),
            ("error", "RuntimeError: plain"),
            ("error", "throw: :up"),
            ("error", "exit: :bye"),
            ("error", "ArgumentError: argument error"),
            ("result", "survived"),
            ("error", "FunctionClauseError: no function clause matching in Solution.solution/1"),
        ],
    ),
    "js": Errors(
        "module.exports = (kind) => {\n"
        "  if (kind === 'type') return null.field;\n"
        "  if (kind === 'string') throw 'just a string';\n"
        "  if (kind === 'object') throw { code: 1 };\n"
        "  if (kind === 'exit') process.exit(3);\n"
        "};\n",
        ["type", "string", "object", "exit"],
        [
            ("error", "Cannot read properties of null (reading 'field')"),
            ("error", "just a string"),
            ("error", "[object Object]"),
            ("error", "process.exit(3)"),
        ],
    ),
    "php": Errors(
        "<?php\n"
        "class Custom extends Exception {}\n"
        "function solution($kind) {\n"
        "    switch ($kind) {\n"
        "        case 'undefined': return undefined_function();\n"
        "        case 'custom': throw new Custom('mine');\n"
        "        case 'bare': throw new RuntimeException();\n"
        "        case 'type': return strlen([]);\n"
        "    }\n"
        "}\n",
        ["undefined", "custom", "bare", "type"],
        [
            ("error", "Error: Call to undefined function undefined_function()"),
            ("error", "Custom: mine"),
            ("error", "RuntimeException"),
            ("error", "TypeError: strlen(): Argument #1 ($string) must be of type string, array given"),
        ],
    ),
    "python": Errors(
        "class Custom(Exception):\n    pass\n"
        "def solution(kind):\n"
        "    if kind == 'key': return {}['missing']\n"
        "    if kind == 'custom': raise Custom('mine')\n"
        "    if kind == 'bare': raise ValueError\n"
        "    if kind == 'exit': raise SystemExit(3)\n",
        ["key", "custom", "bare", "exit"],
        [("error", "KeyError: 'missing'"), ("error", "Custom: mine"), ("error", "ValueError"), ("error", "SystemExit: 3")],
    ),
    "ruby": Errors(
        "class Custom < StandardError; end\n"
        "def solution(kind)\n"
        "  case kind\n"
        "  when 'key' then {}.fetch('missing')\n"
        "  when 'custom' then raise Custom, 'mine'\n"
        "  when 'bare' then raise ArgumentError\n"
        "  when 'exit' then exit 3\n"
        "  when 'throw' then throw :up\n"
        "  when 'deep' then solution(kind)\n"
        "  end\n"
        "end\n",
        ["key", "custom", "bare", "exit", "throw", "deep"],
        [
            ("error", 'KeyError: key not found: "missing"'),
            ("error", "Custom: mine"),
            ("error", "ArgumentError"),
            ("error", "SystemExit: exit"),
            ("error", "UncaughtThrowError: uncaught throw :up"),
            ("error", "SystemStackError: stack level too deep"),
        ],
    ),
}


@rows(ERROR_MESSAGES)
def test_error_messages(slug, ws):
    row = ERROR_MESSAGES[slug]
    res = ws.run(row.solution, json.dumps({"arguments": [[kind] for kind in row.kinds]}))
    assert res.returncode == 0, res.stderr
    assert [(i["type"], i["value"]) for i in res.items()] == row.said


# -- output -------------------------------------------------------------------------------------

OUTPUT_PER_CALL = {  # solution(n) prints in every way the language has, and fails after printing for n == 2
    "elixir": (
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
        "end\n",
        "puts {n}\nwrite {n}\n%{{n: {n}}}\nformat {n}\nfrom a task\n",
    ),
    "js": (
        "module.exports = (n) => {\n"
        "  console.log('log', n);\n"
        "  process.stdout.write('write ' + n + '\\n');\n"
        "  process.stdout.write(Buffer.from('buffer\\n'));\n"
        "  console.info({ n });\n"
        "  if (n === 2) throw new Error('after printing');\n"
        "  return n;\n"
        "};\n",
        "log {n}\nwrite {n}\nbuffer\n{{ n: {n} }}\n",
    ),
    "php": (
        "<?php\n"
        "function solution($n) {\n"
        "    echo \"echo $n\\n\";\n"
        "    print(\"print $n\\n\");\n"
        "    printf(\"printf %d\\n\", $n);\n"
        "    fwrite(STDOUT, \"stdout\\n\");\n"
        "    file_put_contents('php://stdout', \"php-stdout\\n\");\n"
        "    system('echo child');\n"
        "    ob_start();\n"
        "    echo \"left in a buffer\\n\";\n"
        "    if ($n === 2) throw new LogicException('after printing');\n"
        "    return $n;\n"
        "}\n",
        "echo {n}\nprint {n}\nprintf {n}\nstdout\nphp-stdout\nchild\nleft in a buffer\n",
    ),
    "python": (
        "import os, sys\n"
        "def solution(n):\n"
        "    print('print', n)\n"
        "    sys.stdout.write('write %d\\n' % n)\n"
        "    sys.stdout.flush()\n"
        "    sys.stdout.buffer.write(b'buffer\\n')\n"
        "    sys.stdout.buffer.flush()\n"
        "    os.write(1, b'fd\\n')\n"
        "    if n == 2:\n"
        "        raise RuntimeError('after printing')\n"
        "    return n\n",
        "print {n}\nwrite {n}\nbuffer\nfd\n",
    ),
    "ruby": (
        "def solution(n)\n"
        "  puts \"puts #{n}\"\n"
        "  print \"print #{n}\\n\"\n"
        "  $stdout.write(\"write\\n\")\n"
        "  $stdout.flush\n"
        "  STDOUT.syswrite(\"syswrite\\n\")\n"
        "  p n\n"
        "  system('echo child')\n"
        "  raise 'after printing' if n == 2\n"
        "  n\n"
        "end\n",
        "puts {n}\nprint {n}\nwrite\nsyswrite\n{n}\nchild\n",
    ),
    "ts": (
        "export default (n: number): number => {\n"
        "  console.log('log', n);\n"
        "  process.stdout.write(`write ${n}\\n`);\n"
        "  if (n === 2) throw new Error('after printing');\n"
        "  return n;\n"
        "};\n",
        "log {n}\nwrite {n}\n",
    ),
}


@rows(OUTPUT_PER_CALL)
def test_output_is_captured_per_call(slug, ws):
    """Over [[1], [2], [3]] each call's item holds what it printed (the row's text formatted
    with n), the failed one too."""
    solution, output = OUTPUT_PER_CALL[slug]
    res = ws.run(solution, '{"arguments": [[1], [2], [3]]}')
    assert res.returncode == 0, res.stderr
    items = res.items()
    assert [i["output"] for i in items] == [output.format(n=n) for n in (1, 2, 3)]
    assert [i["type"] for i in items] == ["result", "error", "result"]


STDERR_LEFT_ALONE = {  # solution() prints "to stderr" on stderr and returns 1
    "elixir": "defmodule Solution do\n  def solution do\n    IO.puts(:stderr, \"to stderr\")\n    1\n  end\nend\n",
    "js": "module.exports = () => { console.error('to stderr'); return 1; };\n",
    "php": "<?php\nfunction solution() { fwrite(STDERR, \"to stderr\\n\"); return 1; }\n",
    "python": "import sys\ndef solution():\n    print('to stderr', file=sys.stderr)\n    return 1\n",
    "ruby": "def solution\n  warn 'to stderr'\n  1\nend\n",
}


@rows(STDERR_LEFT_ALONE)
def test_stderr_is_left_alone(slug, ws):
    """stderr is not the call's output."""
    res = ws.run(STDERR_LEFT_ALONE[slug], '{"arguments": [[]]}')
    assert res.stderr == "to stderr\n"
    assert res.masked() == report(("result", 1))


LOADING = {  # what the solution prints while loading, before its a+b
    "elixir": ('IO.puts("loading")\nIO.puts("twice")\n', "loading\ntwice\n"),
    "js": ("console.log('loading');\nconsole.log('twice');\n", "loading\ntwice\n"),
    "php": ("<?php\necho \"loading\\n\";\necho \"twice\\n\";\n", "loading\ntwice\n"),
    "python": ("print('loading')\nprint('twice')\n", "loading\ntwice\n"),
    "ruby": ("puts 'loading'\nputs 'twice'\n", "loading\ntwice\n"),
    "ts": ("console.log('loading');\n", "loading\n"),
}


@rows(LOADING)
def test_output_while_loading_comes_first(slug, ws):
    """That output is an item of its own, first."""
    prints, loading = LOADING[slug]
    add = HARNESSES[slug].add.removeprefix("<?php\n")
    assert_reports(ws.run(prints + add, '{"arguments": [[1, 1]]}'), ("result", 2), loading=loading)


@rows(["elixir", "js", "php", "python", "ruby"])
def test_no_output_item_without_output_while_loading(slug, ws):
    res = ws.run(HARNESSES[slug].add, '{"arguments": []}')
    assert (res.returncode, res.stdout) == (0, "[]\n")


LATE_OUTPUT = {  # solution() returns 1, leaving output to come after it (a thread, an exit hook)
    "elixir": (
        'System.at_exit(fn _ -> IO.puts("at exit") end)\n'
        "defmodule Solution do\n"
        "  def solution do\n"
        '    spawn(fn -> Process.sleep(200); IO.puts("late") end)\n'
        "    1\n"
        "  end\n"
        "end\n"
    ),
    "js": "process.on('exit', () => console.log('at exit'));\nmodule.exports = () => { setTimeout(() => console.log('late'), 50); return 1; };\n",
    "php": (
        "<?php\n"
        "class Noisy { function __destruct() { echo \"destructor\\n\"; } }\n"
        "$keep = new Noisy();\n"
        "register_shutdown_function(function () { echo \"shutdown\\n\"; exit(5); });\n"
        "function solution() { return 1; }\n"
    ),
    "python": (
        "import atexit, threading, time\n"
        "atexit.register(print, 'at exit')\n"
        "def solution():\n"
        "    threading.Thread(target=lambda: (time.sleep(0.2), print('late'))).start()\n"
        "    return 1\n"
    ),
    "ruby": "at_exit { puts 'at exit' }\ndef solution\n  Thread.new { sleep 0.2; puts 'late' }\n  1\nend\n",
}


@rows(LATE_OUTPUT)
def test_late_output_cannot_follow_the_report(slug, ws):
    """The report is all stdout has."""
    assert_reports(ws.run(LATE_OUTPUT[slug], '{"arguments": [[]]}'), ("result", 1))


# -- plain mode ---------------------------------------------------------------------------------

WITHOUT_ASSERTS = {  # a plain program, and what it prints run without asserts.json
    "elixir": ('IO.inspect({"hello", System.argv(), Path.basename(__ENV__.file)})\n', '{"hello", [], "solution.exs"}\n'),
    "js": ("console.log('hello', require.main === module, process.argv.length);\n", "hello true 2\n"),
    "php": ("<?php\necho json_encode(['hello', $argv, basename(__FILE__)]), \"\\n\";\n", '["hello",["solution.php"],"solution.php"]\n'),
    "python": ("import sys\nprint('hello', sys.argv, __name__)\n", "hello ['solution.py'] __main__\n"),
    "ruby": ("puts ['hello', __FILE__, $0, ARGV].inspect\n", '["hello", "solution.rb", "solution.rb", []]\n'),
    "ts": ("const greeting: string = 'hello';\nconsole.log(greeting, require.main === module, process.argv.length);\n", "hello true 2\n"),
}


@rows(WITHOUT_ASSERTS)
def test_plain_mode_without_asserts_json(slug, ws):
    program, prints = WITHOUT_ASSERTS[slug]
    assert ws.run(program).outcome == (0, prints, "")


NOT_THE_SHAPE_PLAIN = {  # after the a+b, what says it ran as the main program, and what that prints
    "elixir": ('IO.puts("plain")\n', "plain\n"),
    "js": ("console.log('plain', require.main === module);\n", "plain true\n"),
    "php": ("echo 'plain ', count(get_defined_vars()) > 0 ? 'vars' : 'none', \"\\n\";\n", "plain vars\n"),
    "python": ("print('plain', __name__)\n", "plain __main__\n"),
    "ruby": ("puts ['plain', __FILE__ == $0].inspect\n", '["plain", true]\n'),
    "ts": ("console.log('plain', require.main === module);\n", "plain true\n"),
}


@rows(NOT_THE_SHAPE_PLAIN)
@pytest.mark.parametrize("asserts", NOT_THE_SHAPE)
def test_plain_mode_when_asserts_are_not_of_the_shape(slug, ws, asserts):
    then, prints = NOT_THE_SHAPE_PLAIN[slug]
    assert ws.run(HARNESSES[slug].add + then, asserts).outcome == (0, prints, "")


INVALID_JSON_PLAIN = {  # after the a+b, a line printed
    "elixir": 'IO.puts("plain")\n',
    "js": "console.log('plain');\n",
    "php": 'echo "plain\\n";\n',
    "python": "print('plain')\n",
    "ruby": "puts 'plain'\n",
    "ts": "console.log('plain');\n",
}


@rows(INVALID_JSON_PLAIN)
@pytest.mark.parametrize("asserts", INVALID_JSON)
def test_plain_mode_when_asserts_are_invalid_json(slug, ws, asserts):
    assert ws.run(HARNESSES[slug].add + INVALID_JSON_PLAIN[slug], asserts).outcome == (0, "plain\n", "")


@rows(HARNESSES)
def test_the_original_runner_payload(slug, ws):
    """A plain program that reads asserts.json ({"a": 2, "b": 3}) and prints a + b runs as such."""
    assert ws.run(HARNESSES[slug].runner_payload, '{"a": 2, "b": 3}').outcome == (0, "5\n", "")


NO_SOLUTION = {  # programs defining no solution, run with asserts, and their (status, stdout, stderr)
    "elixir": [
        ('IO.puts("no module here")\nexit({:shutdown, 3})\n', (3, "no module here\n", "")),
        # System.halt/1 ends the VM on the spot: the output of loading, held by the harness, is lost
        ('IO.puts("no module here")\nSystem.halt(3)\n', (3, "", "")),
    ],
    "js": [("console.log('no function here');\nprocess.exit(3);\n", (3, "no function here\n", ""))],
    "php": [("<?php\necho \"no function here\\n\";\nexit(3);\n", (3, "no function here\n", ""))],
    "python": [("import sys\nprint('no function here')\nsys.stdout.flush()\nsys.exit(3)\n", (3, "no function here\n", ""))],
    "ruby": [("puts 'no method here'\nexit 3\n", (3, "no method here\n", ""))],
    "ts": [("console.log('no function here');\nprocess.exit(3);\n", (3, "no function here\n", ""))],
}


@rows(NO_SOLUTION)
def test_no_solution_passes_output_and_status_through(slug, ws):
    for program, outcome in NO_SOLUTION[slug]:
        assert ws.run(program, '{"arguments": [[1, 2]]}').outcome == outcome


RUNS_TO_ITS_END = {  # a program with no solution (or one that is no function): it runs as a plain one
    "elixir": ('System.at_exit(fn _ -> IO.puts("at exit") end)\ndefmodule Other do\n  def f, do: 1\nend\nIO.puts("done")\n', (0, "done\nat exit\n", "")),
    "js": ("module.exports = 42;\nconsole.log('loaded');\nsetTimeout(() => console.log('later'), 5);\nprocess.exitCode = 2;\n", (2, "loaded\nlater\n", "")),
    "php": ("<?php\nregister_shutdown_function(function () { echo \"shutdown\\n\"; });\n$solution = 42;\necho \"done\\n\";\n", (0, "done\nshutdown\n", "")),
    "python": ("solution = 42\nprint('done')\n", (0, "done\n", "")),
    "ruby": ("at_exit { puts 'at exit' }\nsolution = 42\nputs 'done'\n", (0, "done\nat exit\n", "")),
}


@rows(RUNS_TO_ITS_END)
def test_no_solution_runs_to_its_end(slug, ws):
    program, outcome = RUNS_TO_ITS_END[slug]
    assert ws.run(program, '{"arguments": [[1, 2]]}').outcome == outcome


@dataclass(frozen=True)
class Exit:
    """A plain program's ending: its status, and stdout or stderr where the row pins them."""

    program: str
    status: int
    stdout: str | None = None
    stderr: str | None = None


EXIT_STATUSES = {
    "elixir": [Exit("System.halt(3)\n", 3), Exit("exit({:shutdown, 5})\n", 5)],
    "js": [Exit("process.exit(3);\n", 3), Exit("process.exitCode = 5;\n", 5)],
    "php": [Exit("<?php\nexit(3);\n", 3), Exit("<?php\nexit('bye');\n", 0, stdout="bye")],
    "python": [Exit("import sys\nsys.exit(3)\n", 3), Exit("import sys\nsys.exit('bye')\n", 1, stderr="bye\n")],
    "ruby": [Exit("exit 3\n", 3), Exit("abort 'bye'\n", 1, stderr="bye\n")],
    "ts": [Exit("process.exitCode = 5;\n", 5)],
}


@rows(EXIT_STATUSES)
def test_exit_status_in_plain_mode(slug, ws):
    for ending in EXIT_STATUSES[slug]:
        res = ws.run(ending.program)
        assert res.returncode == ending.status, res.outcome
        assert ending.stdout in (None, res.stdout) and ending.stderr in (None, res.stderr), res.outcome


# -- the workspace and the process --------------------------------------------------------------


@rows(["elixir", "php", "ruby", "ts"])  # python's: no bytecode (test_python_harness.py)
def test_nothing_is_written_to_the_workspace(slug, ws):
    """Running twice leaves the workspace's files (node_modules aside) as the first run did."""

    def files() -> list[Path]:
        return sorted(p.relative_to(ws.root) for p in ws.root.rglob("*") if "node_modules" not in p.parts)

    ws.run(HARNESSES[slug].add, '{"arguments": [[1, 2]]}')
    before = files()
    ws.run(HARNESSES[slug].add, '{"arguments": [[1, 2]]}')
    assert files() == before


STATE_KEPT = {  # solution() counts its calls in the language's own way
    "elixir": "defmodule Solution do\n  def solution do\n    n = (Process.get(:n) || 0) + 1\n    Process.put(:n, n)\n    n\n  end\nend\n",
    "php": "<?php\nfunction solution() { static $n = 0; return ++$n; }\n",
    "ruby": "$calls = 0\ndef solution = ($calls += 1)\n",
}


@rows(STATE_KEPT)
def test_state_is_kept_between_calls(slug, ws):
    assert ws.run(STATE_KEPT[slug], '{"arguments": [[], [], []]}').values() == [1, 2, 3]


GIVEN_UP = {"php": "<?php echo 'ran';\n", "python": "print('ran')\n", "ruby": "puts 'ran'\n"}  # a solution that prints


@rows(GIVEN_UP)
def test_a_prestarted_harness_given_up_before_its_request_runs_nothing(slug, tmp_path):
    given_up = harness_workspace(slug, tmp_path, prestarted=True)
    (given_up.check / given_up.solution_name).write_text(GIVEN_UP[slug])
    go_r, go_w = os.pipe()
    os.close(go_w)  # end-of-file, no byte: kiln closed the slot unused
    done = subprocess.run(["/bin/sh", "-e", "-c", given_up.command], cwd=given_up.root, close_fds=False, preexec_fn=lambda: go_on_fd_3(go_r), capture_output=True, timeout=60)
    os.close(go_r)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
