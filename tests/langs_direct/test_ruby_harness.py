"""langs/ruby: its test command and check/harness.rb, run directly (no kiln, no sandbox)."""

from __future__ import annotations

import json

import pytest

import harnesscase
from harnesscase import report

ADD = harnesscase.HARNESSES["ruby"].add


@pytest.fixture(params=["test", "prestart"])
def rb(tmp_path, request) -> harnesscase.Workspace:
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.harness_workspace("ruby", tmp_path, prestarted=request.param == "prestart")

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


def test_harness_mode_loads_the_solution_as_a_library(rb):
    solution = "puts 'main' if __FILE__ == $0\ndef solution = [__FILE__, $0, __dir__ == Dir.pwd]\n"
    res = rb.run(solution, '{"arguments": [[]]}')
    assert res.masked() == report(("result", [f"{rb.check}/solution.rb", "solution.rb", True]))


def test_a_solution_module_method_is_called_too(rb):
    res = rb.run("module Solution\n  def self.solution(a) = a * 2\nend\n", '{"arguments": [[21]]}')
    assert res.values() == [42]


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