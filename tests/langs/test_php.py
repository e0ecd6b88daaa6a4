"""php through the real HTTP API and the real sandbox: langs/php's harness (auto_prepend_file /
auto_append_file around solution.php) calls the solution's `solution` function per argument list
and prints the harness protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import langcase

pytestmark = langcase.only("php")
PHP = langcase.LANGS["php"]


def test_exit_in_a_call_is_an_error_of_that_call(lang_server):
    solution = "<?php\nfunction solution($n) { if ($n === 2) exit(1); return $n; }\n"
    got = PHP.items(PHP.run(lang_server, solution, asserts='{"arguments": [[1], [2], [3]]}'))
    assert [(i["type"], i["value"]) for i in got] == [("result", 1), ("error", "exit"), ("result", 3)]


def test_plain_program_errors_and_status(lang_server):
    body = PHP.run(lang_server, "<?php\necho \"before\\n\";\nthrow new Exception('boom');\n")
    assert (body["exit_code"], body["stdout"]) == (255, "before\n")
    assert body["stderr"].startswith("PHP Fatal error:  Uncaught Exception: boom in /sandbox/check/solution.php:3\n")
    body = PHP.run(lang_server, "<?php\nfunction broken( {\n")
    assert body["exit_code"] == 255 and "PHP Parse error:" in body["stderr"]
    assert PHP.run(lang_server, "<?php\nexit(3);\n")["exit_code"] == 3


def test_the_php_ini_and_extensions_are_there(lang_server):
    solution = "<?php\nfunction solution($s) {\n    return [mb_strtoupper($s), ctype_digit('123'), ini_get('memory_limit'), php_ini_loaded_file() !== false];\n}\n"
    got = PHP.items(PHP.run(lang_server, solution, asserts='{"arguments": [["привет"]]}'))
    assert got[0]["value"] == ["ПРИВЕТ", True, "-1", True], got
