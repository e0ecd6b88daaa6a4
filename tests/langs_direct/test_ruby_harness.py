"""langs/ruby: its test command and check/harness.rb, run directly (no kiln, no sandbox)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import harnesscase
from harnesscase import INVALID_JSON, NOT_THE_SHAPE, assert_reports, report

RUBY = "/usr/bin/ruby"
ADD = "def solution(a, b)\n  a + b\nend\n"

# The original runner's payload: a plain script that reads asserts.json itself.
RUNNER_PAYLOAD = """require 'json'

data = JSON.parse(File.read('asserts.json'))
puts data['a'] + data['b']
"""


@pytest.fixture(params=["test", "prestart"])
def rb(tmp_path, request):
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.workspace(tmp_path, "ruby", "solution.rb", RUBY, ": run langs/ruby/install.sh", prestarted=request.param == "prestart")


def test_test_command_is_one_simple_line(rb):
    wanted = "prestart.rb" if rb.prestarted else "-r./harness.rb solution.rb"
    assert rb.command == f"cd check && exec /usr/bin/ruby {wanted}\n"
    harnesscase.assert_simple_test_target(rb)


def test_a_plus_b_over_several_argument_lists(rb):
    harnesscase.assert_a_plus_b(rb, ADD)


def test_an_error_in_one_call_does_not_stop_the_others(rb):
    res = rb.run("def solution(a, b)\n  a / b\nend\n", '{"arguments": [[7, 2], [1, 0], [9, 3]]}')
    assert_reports(res, ("result", 3), ("error", "ZeroDivisionError: divided by 0"), ("result", 3))


def test_error_messages(rb):
    solution = (
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
        "end\n"
    )
    res = rb.run(solution, '{"arguments": [["key"], ["custom"], ["bare"], ["exit"], ["throw"], ["deep"]]}')
    assert res.returncode == 0
    assert [(i["type"], i["value"]) for i in res.items()] == [
        ("error", 'KeyError: key not found: "missing"'),
        ("error", "Custom: mine"),
        ("error", "ArgumentError"),
        ("error", "SystemExit: exit"),
        ("error", "UncaughtThrowError: uncaught throw :up"),
        ("error", "SystemStackError: stack level too deep"),
    ]


def test_output_is_captured_per_call(rb):
    solution = (
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
        "end\n"
    )
    harnesscase.assert_output_per_call(rb, solution, [f"puts {n}\nprint {n}\nwrite\nsyswrite\n{n}\nchild\n" for n in (1, 2, 3)])


def test_stderr_is_left_alone(rb):
    harnesscase.assert_stderr_left_alone(rb, "def solution\n  warn 'to stderr'\n  1\nend\n")


def test_output_while_loading_comes_first(rb):
    harnesscase.assert_loading_output_comes_first(rb, "puts 'loading'\nputs 'twice'\n" + ADD, "loading\ntwice\n")


def test_no_output_item_without_output_while_loading(rb):
    harnesscase.assert_no_output_item_without_output_while_loading(rb, ADD)


def test_values_are_serialised_naturally(rb):
    solution = (
        "require 'set'\n"
        "Point = Struct.new(:x, :y)\n"
        "class Thing; end\n"
        "class Named; def to_s = 'named'; end\n"
        "def solution(kind)\n"
        "  {\n"
        "    'nil' => nil, 'bool' => true, 'sym' => :sym, 'hash' => { a: [1, { 2 => 3.5 }] },\n"
        "    'set' => Set[3, 1, 2], 'nan' => Float::NAN, 'inf' => -Float::INFINITY,\n"
        "    'text' => 'привет \"q\"', 'big' => 2**100, 'struct' => Point.new(1, 2),\n"
        "    'range' => (1..3), 'thing' => Thing.new, 'named' => Named.new, 'rational' => Rational(6, 3),\n"
        "    'binary' => \"\\xff ok\".b,\n"
        "  }[kind]\n"
        "end\n"
    )
    kinds = ["nil", "bool", "sym", "hash", "set", "nan", "inf", "text", "big", "struct", "range", "thing", "named", "rational", "binary"]
    res = rb.run(solution, json.dumps({"arguments": [[k] for k in kinds]}))
    assert res.returncode == 0, res.stderr
    values = res.values()
    assert values[:12] == [None, True, "sym", {"a": [1, {"2": 3.5}]}, [1, 2, 3], None, None, 'привет "q"', 2**100, {"x": 1, "y": 2}, [1, 2, 3], values[11]]
    assert values[11].startswith("#<Thing")
    assert values[12:] == ["named", 2, "\ufffd ok"]
    assert '"value":"привет \\"q\\""' in res.stdout  # UTF-8, not \u escapes
    assert '"value":1267650600228229401496703205376,' in res.stdout  # exact


def test_a_cycle_is_its_inspect_text(rb):
    res = rb.run("def solution\n  a = [1]\n  a << a\n  a\nend\n", '{"arguments": [[]]}')
    assert res.masked() == report(("result", "[1, [...]]"))


def test_hash_arguments_and_string_keys(rb):
    res = rb.run("def solution(h, list)\n  [h['a'] + list.sum, h.keys]\nend\n", '{"arguments": [[{"a": 1, "b": 2}, [3, 4]]]}')
    assert res.values() == [[8, ["a", "b"]]]


def test_plain_mode_without_asserts_json(rb):
    res = rb.run("puts ['hello', __FILE__, $0, ARGV].inspect\n")
    assert res.outcome == (0, '["hello", "solution.rb", "solution.rb", []]\n', "")


@pytest.mark.parametrize("asserts", NOT_THE_SHAPE)
def test_plain_mode_when_asserts_are_not_of_the_shape(rb, asserts):
    assert rb.run(ADD + "puts ['plain', __FILE__ == $0].inspect\n", asserts).outcome == (0, '["plain", true]\n', "")


@pytest.mark.parametrize("asserts", INVALID_JSON)
def test_plain_mode_when_asserts_are_invalid_json(rb, asserts):
    assert rb.run(ADD + "puts 'plain'\n", asserts).outcome == (0, "plain\n", "")


def test_the_original_runner_payload(rb):
    harnesscase.assert_runner_payload_runs(rb, RUNNER_PAYLOAD)


def test_plain_mode_is_the_bare_run(rb):
    solution = (
        "puts [__FILE__, $0, __dir__ == Dir.pwd, ARGV, __method__.inspect].inspect\n"
        "puts $stdin.read.upcase\n"
        "at_exit { puts 'at exit' }\n"
        "warn 'err'\n"
        "puts DATA.read\n"
        "exit 4\n"
        "__END__\n"
        "data section\n"
    )
    res = rb.run(solution, '{"a": 1}', stdin="some input\n")
    assert res.outcome == rb.bare(stdin="some input\n").outcome
    assert res.returncode == 4 and res.stdout.startswith('["solution.rb", "solution.rb", true, [], "nil"]\nSOME INPUT\n')


def test_no_solution_method_passes_output_and_status_through(rb):
    assert rb.run("puts 'no method here'\nexit 3\n", '{"arguments": [[1, 2]]}').outcome == (3, "no method here\n", "")


def test_no_solution_method_runs_to_its_end(rb):
    res = rb.run("at_exit { puts 'at exit' }\nsolution = 42\nputs 'done'\n", '{"arguments": [[1, 2]]}')
    assert res.outcome == (0, "done\nat exit\n", "")


def test_an_error_while_loading_passes_through_as_bare(rb):
    solution = "puts 'before'\ndef f = raise('while loading')\nf\n" + ADD
    res = rb.run(solution, '{"arguments": [[1, 2]]}')
    bare = rb.bare()
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert res.stderr == "solution.rb:2:in `f': while loading (RuntimeError)\n\tfrom solution.rb:3:in `<main>'\n"
    assert res.outcome == bare.outcome


def test_a_name_error_while_loading_is_reported_as_bare(rb):
    res = rb.run("x = nil\nx.foo\n" + ADD, '{"arguments": [[1, 2]]}')
    bare = rb.bare()
    assert res.returncode == 1 and "undefined method `foo' for nil" in res.stderr
    assert res.outcome == bare.outcome


def test_uncaught_exception_in_plain_mode(rb):
    solution = "def f\n  raise ArgumentError, 'boom'\nend\n\nputs 'before'\nf\n"
    res = rb.run(solution)
    bare = rb.bare()
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert res.stderr == "solution.rb:2:in `f': boom (ArgumentError)\n\tfrom solution.rb:6:in `<main>'\n"
    assert res.outcome == bare.outcome


@pytest.mark.parametrize("asserts", [None, '{"arguments": [[1, 2]]}'], ids=["plain", "harness"])
def test_syntax_error_is_reported_as_bare(rb, asserts):
    res = rb.run("def broken(\n  1\n", asserts)
    bare = rb.bare()
    assert res.returncode == 1 and "syntax error" in res.stderr and "harness" not in res.stderr
    assert res.outcome == bare.outcome


def test_exit_status_in_plain_mode(rb):
    assert rb.run("exit 3\n").returncode == 3
    res = rb.run("abort 'bye'\n")
    assert (res.returncode, res.stderr) == (1, "bye\n")


def test_harness_mode_loads_the_solution_as_a_library(rb):
    solution = "puts 'main' if __FILE__ == $0\ndef solution = [__FILE__, $0, __dir__ == Dir.pwd]\n"
    res = rb.run(solution, '{"arguments": [[]]}')
    assert res.masked() == report(("result", [f"{rb.check}/solution.rb", "solution.rb", True]))


def test_a_solution_module_method_is_called_too(rb):
    res = rb.run("module Solution\n  def self.solution(a) = a * 2\nend\n", '{"arguments": [[21]]}')
    assert res.values() == [42]


def test_state_is_kept_between_calls(rb):
    assert rb.run("$calls = 0\ndef solution = ($calls += 1)\n", '{"arguments": [[], [], []]}').values() == [1, 2, 3]


def test_late_output_cannot_follow_the_report(rb):
    solution = "at_exit { puts 'at exit' }\ndef solution\n  Thread.new { sleep 0.2; puts 'late' }\n  1\nend\n"
    harnesscase.assert_late_output_cannot_follow_the_report(rb, solution)


def test_nothing_is_written_to_the_workspace(rb):
    harnesscase.assert_nothing_is_written_to_the_workspace(rb, ADD)


def test_a_syntax_error_raised_while_loading_is_an_error_while_loading(rb):
    (rb.check / "broken.rb").write_text("def (\n")
    res = rb.run("puts 'before'\nrequire_relative 'broken'\n" + ADD, '{"arguments": [[1, 2]]}')
    bare = rb.bare()
    assert (res.returncode, res.stdout) == (1, "before\n")  # the solution ran once, not twice
    assert "broken.rb:1: syntax error" in res.stderr and "harness" not in res.stderr
    assert res.stderr == bare.stderr


def test_sets_are_arrays_without_the_harness_loading_set(rb):
    res = rb.run("def solution = [defined?(Set) ? 'set' : 'no set', $LOADED_FEATURES.grep(/\\/set\\.rb/).size]\n", '{"arguments": [[]]}')
    assert res.values() == [["no set", 0]]  # as in a bare Ruby 3.1 run


def test_a_prestarted_harness_given_up_before_its_request_runs_nothing(tmp_path):
    ws = harnesscase.workspace(tmp_path, "ruby", "solution.rb", RUBY, prestarted=True)
    (ws.check / "solution.rb").write_text("puts 'ran'\n")
    go_r, go_w = os.pipe()
    os.close(go_w)  # end-of-file, no byte: kiln closed the slot unused
    done = subprocess.run(["/bin/sh", "-e", "-c", ws.command], cwd=ws.root, close_fds=False, preexec_fn=lambda: harnesscase.go_on_fd_3(go_r), capture_output=True, timeout=60)
    os.close(go_r)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
