"""ruby through the real HTTP API and the real sandbox: langs/ruby's harness runs the solution's
`solution` method per argument list and prints the harness protocol."""

from __future__ import annotations

import pytest

import langcase

AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'
RUBY = langcase.Lang("ruby", timed=True)


@pytest.fixture(scope="module")
def server():
    yield from RUBY.serve(langcase.missing("run langs/ruby/install.sh", paths=(("/usr/bin/ruby", "/usr/bin/ruby is not installed"),)))


def test_a_plus_b_with_the_example_solution(server):
    langcase.assert_example_a_plus_b(RUBY, server, "solution.rb", AB)


def test_a_runtime_error_in_one_call_leaves_the_others(server):
    langcase.assert_division_by_zero_fails_alone(RUBY, server, "def solution(a, b)\n  a / b\nend\n", "ZeroDivisionError: divided by 0")


def test_output_is_captured_per_call(server):
    solution = "puts 'loading'\ndef solution(n)\n  puts \"call #{n}\"\n  system('echo child')\n  n\nend\n"
    langcase.assert_output_per_call(RUBY, server, solution, also="child\n")


def test_an_infinite_loop_times_out(server):
    langcase.assert_timed_out(RUBY.run(server, "def solution\n  loop {}\nend\n", asserts='{"arguments": [[]]}', timeout="2s"))


def test_the_original_runner_payload_runs_as_a_plain_program(server):
    solution = "require 'json'\ndata = JSON.parse(File.read('asserts.json'))\nputs data['a'] + data['b']\n"
    langcase.assert_runner_payload_runs(RUBY, server, solution)


def test_plain_program_errors_and_status(server):
    body = RUBY.run(server, "puts 'before'\nraise ArgumentError, 'boom'\n")
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"] == "solution.rb:2:in `<main>': boom (ArgumentError)\n"
    body = RUBY.run(server, "def broken(\n")
    assert body["exit_code"] == 1 and "syntax error" in body["stderr"]


def test_stdin_reaches_a_plain_program(server):
    langcase.assert_stdin_reaches_a_plain_program(RUBY, server, "puts $stdin.read.upcase\n")


def test_stdlib_and_gems_load_in_the_sandbox(server):
    solution = "require 'set'\nrequire 'prime'\nrequire 'bigdecimal'\ndef solution(n)\n  [Prime.first(n), Set[3, 1].sort, BigDecimal('0.1').to_s]\nend\n"
    got = RUBY.items(RUBY.run(server, solution, asserts='{"arguments": [[4]]}'))
    assert got[0]["value"] == [[2, 3, 5, 7], [1, 3], "0.1e0"], got
