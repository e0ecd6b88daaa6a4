"""ruby through the real HTTP API and the real sandbox: langs/ruby's harness runs the solution's
`solution` method per argument list and prints the harness protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import langcase

pytestmark = langcase.only("ruby")
RUBY = langcase.LANGS["ruby"]


def test_plain_program_errors_and_status(lang_server):
    body = RUBY.run(lang_server, "puts 'before'\nraise ArgumentError, 'boom'\n")
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert body["stderr"] == "solution.rb:2:in `<main>': boom (ArgumentError)\n"
    body = RUBY.run(lang_server, "def broken(\n")
    assert body["exit_code"] == 1 and "syntax error" in body["stderr"]


def test_stdlib_and_gems_load_in_the_sandbox(lang_server):
    solution = "require 'set'\nrequire 'prime'\nrequire 'bigdecimal'\ndef solution(n)\n  [Prime.first(n), Set[3, 1].sort, BigDecimal('0.1').to_s]\nend\n"
    got = RUBY.items(RUBY.run(lang_server, solution, asserts='{"arguments": [[4]]}'))
    assert got[0]["value"] == [[2, 3, 5, 7], [1, 3], "0.1e0"], got
