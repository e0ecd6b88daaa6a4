"""php through the real HTTP API and the real sandbox: langs/php's harness (auto_prepend_file /
auto_append_file around solution.php) calls the solution's `solution` function per argument list
and prints the harness protocol."""

from __future__ import annotations

import pytest

import langcase

AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'
PHP = langcase.Lang("php", timed=True)


@pytest.fixture(scope="module")
def server():
    yield from PHP.serve(langcase.missing("run langs/php/install.sh", paths=(("/usr/bin/php", "/usr/bin/php is not installed"),)))


def test_a_plus_b_with_the_example_solution(server):
    langcase.assert_example_a_plus_b(PHP, server, "solution.php", AB)


def test_a_runtime_error_in_one_call_leaves_the_others(server):
    solution = "<?php\nfunction solution($a, $b) { return intdiv($a, $b); }\n"
    langcase.assert_division_by_zero_fails_alone(PHP, server, solution, "DivisionByZeroError: Division by zero")


def test_exit_in_a_call_is_an_error_of_that_call(server):
    solution = "<?php\nfunction solution($n) { if ($n === 2) exit(1); return $n; }\n"
    got = PHP.items(PHP.run(server, solution, asserts='{"arguments": [[1], [2], [3]]}'))
    assert [(i["type"], i["value"]) for i in got] == [("result", 1), ("error", "exit"), ("result", 3)]


def test_output_is_captured_per_call(server):
    solution = "<?php\necho \"loading\\n\";\nfunction solution($n) {\n    echo \"call $n\\n\";\n    fwrite(STDOUT, \"stdout\\n\");\n    system('echo child');\n    return $n;\n}\n"
    langcase.assert_output_per_call(PHP, server, solution, also="stdout\nchild\n")


def test_an_infinite_loop_times_out(server):
    langcase.assert_timed_out(PHP.run(server, "<?php\nfunction solution() { while (true) {} }\n", asserts='{"arguments": [[]]}', timeout="2s"))


def test_the_original_runner_payload_runs_as_a_plain_program(server):
    solution = "<?php\n$data = json_decode(file_get_contents('asserts.json'), true);\necho $data['a'] + $data['b'], \"\\n\";\n"
    langcase.assert_runner_payload_runs(PHP, server, solution)


def test_plain_program_errors_and_status(server):
    body = PHP.run(server, "<?php\necho \"before\\n\";\nthrow new Exception('boom');\n")
    assert (body["exit_code"], body["stdout"]) == (255, "before\n")
    assert body["stderr"].startswith("PHP Fatal error:  Uncaught Exception: boom in /sandbox/check/solution.php:3\n")
    body = PHP.run(server, "<?php\nfunction broken( {\n")
    assert body["exit_code"] == 255 and "PHP Parse error:" in body["stderr"]
    assert PHP.run(server, "<?php\nexit(3);\n")["exit_code"] == 3


def test_stdin_reaches_a_plain_program(server):
    langcase.assert_stdin_reaches_a_plain_program(PHP, server, "<?php\necho strtoupper(stream_get_contents(STDIN));\n")


def test_the_php_ini_and_extensions_are_there(server):
    solution = "<?php\nfunction solution($s) {\n    return [mb_strtoupper($s), ctype_digit('123'), ini_get('memory_limit'), php_ini_loaded_file() !== false];\n}\n"
    got = PHP.items(PHP.run(server, solution, asserts='{"arguments": [["привет"]]}'))
    assert got[0]["value"] == ["ПРИВЕТ", True, "-1", True], got
