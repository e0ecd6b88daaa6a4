"""langs/php: its test command and check/prepend.php, harness.php, append.php, run directly (no
kiln, no sandbox)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

import harnesscase
from harnesscase import INVALID_JSON, NOT_THE_SHAPE, assert_reports, report

PHP = "/usr/bin/php"
ADD = "<?php\nfunction solution($a, $b)\n{\n    return $a + $b;\n}\n"

# The original runner's payload: a plain script that reads asserts.json itself.
RUNNER_PAYLOAD = """<?php
$data = json_decode(file_get_contents('asserts.json'), true);
echo $data['a'] + $data['b'], "\\n";
"""


@pytest.fixture(params=["test", "prestart"])
def php(tmp_path, request):
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.workspace(tmp_path, "php", "solution.php", PHP, ": run langs/php/install.sh", prestarted=request.param == "prestart")


def test_test_command_is_one_simple_line(php):
    main = "prestart.php" if php.prestarted else "solution.php"
    assert php.command == f"cd check && exec /usr/bin/php -d auto_prepend_file=./prepend.php -d auto_append_file=./append.php {main}\n"
    harnesscase.assert_simple_test_target(php)


def test_a_plus_b_over_several_argument_lists(php):
    harnesscase.assert_a_plus_b(php, ADD)


def test_an_error_in_one_call_does_not_stop_the_others(php):
    res = php.run("<?php\nfunction solution($a, $b) { return intdiv($a, $b); }\n", '{"arguments": [[7, 2], [1, 0], [9, 3]]}')
    assert_reports(res, ("result", 3), ("error", "DivisionByZeroError: Division by zero"), ("result", 3))


def test_error_messages(php):
    solution = (
        "<?php\n"
        "class Custom extends Exception {}\n"
        "function solution($kind) {\n"
        "    switch ($kind) {\n"
        "        case 'undefined': return undefined_function();\n"
        "        case 'custom': throw new Custom('mine');\n"
        "        case 'bare': throw new RuntimeException();\n"
        "        case 'type': return strlen([]);\n"
        "    }\n"
        "}\n"
    )
    res = php.run(solution, '{"arguments": [["undefined"], ["custom"], ["bare"], ["type"]]}')
    assert res.returncode == 0
    assert [(i["type"], i["value"]) for i in res.items()] == [
        ("error", "Error: Call to undefined function undefined_function()"),
        ("error", "Custom: mine"),
        ("error", "RuntimeException"),
        ("error", "TypeError: strlen(): Argument #1 ($string) must be of type string, array given"),
    ]


def test_exit_in_a_call_is_an_error_of_that_call(php):
    solution = "<?php\nfunction solution($n) {\n    echo \"n=$n\\n\";\n    if ($n === 2) exit(3);\n    if ($n === 3) die('dying');\n    return $n;\n}\n"
    res = php.run(solution, '{"arguments": [[1], [2], [4]]}')
    assert_reports(res, ("result", 1, "n=1\n"), ("error", "exit", "n=2\n"), ("result", 4, "n=4\n"))
    res = php.run(solution, '{"arguments": [[3], [1]]}')
    assert res.masked() == report(("error", "exit", "n=3\ndying"), ("result", 1, "n=1\n"))


def test_output_is_captured_per_call(php):
    solution = (
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
        "}\n"
    )
    outputs = [f"echo {n}\nprint {n}\nprintf {n}\nstdout\nphp-stdout\nchild\nleft in a buffer\n" for n in (1, 2, 3)]
    harnesscase.assert_output_per_call(php, solution, outputs)


def test_stderr_is_left_alone(php):
    harnesscase.assert_stderr_left_alone(php, "<?php\nfunction solution() { fwrite(STDERR, \"to stderr\\n\"); return 1; }\n")


def test_warnings_go_to_stderr(php):
    res = php.run("<?php\nfunction solution() { $a = []; return $a['missing'] ?? 1 + $a['x']; }\n", '{"arguments": [[]]}')
    assert res.masked() == report(("result", 1))
    assert 'Warning:  Undefined array key "x"' in res.stderr


def test_output_while_loading_comes_first(php):
    harnesscase.assert_loading_output_comes_first(php, "<?php\necho \"loading\\n\";\necho \"twice\\n\";\n" + ADD[6:], "loading\ntwice\n")


def test_text_outside_php_tags_is_output_while_loading(php):
    res = php.run("header line\n" + ADD, '{"arguments": [[1, 1]]}')
    assert res.masked() == report(("result", 2), loading="header line\n")


def test_no_output_item_without_output_while_loading(php):
    harnesscase.assert_no_output_item_without_output_while_loading(php, ADD)


def test_values_are_serialised_naturally(php):
    solution = (
        "<?php\n"
        "class Point { public $x = 1; public $y = 2; private $hidden = 3; }\n"
        "function solution($kind) {\n"
        "    return [\n"
        "        'null' => null, 'bool' => true, 'list' => [1, [2, 3]], 'assoc' => ['a' => 1, 'b' => [true]],\n"
        "        'sparse' => [1 => 'x'], 'empty' => [], 'float' => 0.1 + 0.2, 'whole' => 4.0,\n"
        "        'text' => 'привет \"q\" /', 'object' => new Point(), 'nan' => NAN, 'inf' => [INF],\n"
        "        'binary' => \"\\xff ok\",\n"
        "    ][$kind];\n"
        "}\n"
    )
    kinds = ["null", "bool", "list", "assoc", "sparse", "empty", "float", "whole", "text", "object", "nan", "inf", "binary"]
    res = php.run(solution, json.dumps({"arguments": [[k] for k in kinds]}))
    assert res.returncode == 0, res.stderr
    assert res.values() == [
        None, True, [1, [2, 3]], {"a": 1, "b": [True]}, {"1": "x"}, [], 0.30000000000000004, 4,
        'привет "q" /', {"x": 1, "y": 2}, None, [None], "\ufffd ok",
    ]
    assert '"value":"привет \\"q\\" /"' in res.stdout  # UTF-8 and slashes as they are


def test_object_arguments_are_arrays(php):
    res = php.run("<?php\nfunction solution(array $h, array $list) { return [$h['a'] + array_sum($list), array_keys($h)]; }\n", '{"arguments": [[{"a": 1, "b": 2}, [3, 4]], [{}, []]]}')
    assert res.values() == [[8, ["a", "b"]], [0, []]]


def test_plain_mode_without_asserts_json(php):
    res = php.run("<?php\necho json_encode(['hello', $argv, basename(__FILE__)]), \"\\n\";\n")
    assert res.outcome == (0, '["hello",["solution.php"],"solution.php"]\n', "")


@pytest.mark.parametrize("asserts", [*NOT_THE_SHAPE, pytest.param('[{"arguments": [[1]]}]', id="nested")])
def test_plain_mode_when_asserts_are_not_of_the_shape(php, asserts):
    res = php.run(ADD + "echo 'plain ', count(get_defined_vars()) > 0 ? 'vars' : 'none', \"\\n\";\n", asserts)
    assert res.outcome == (0, "plain vars\n", "")


@pytest.mark.parametrize("asserts", INVALID_JSON)
def test_plain_mode_when_asserts_are_invalid_json(php, asserts):
    assert php.run(ADD + "echo \"plain\\n\";\n", asserts).outcome == (0, "plain\n", "")


def test_the_original_runner_payload(php):
    harnesscase.assert_runner_payload_runs(php, RUNNER_PAYLOAD)


def test_plain_mode_leaves_no_names_behind(php):
    solution = (
        "<?php\n"
        "$vars = array_keys(get_defined_vars());\n"
        "sort($vars);\n"
        "echo json_encode([$vars, get_defined_functions()['user'], class_exists('KilnHarness')]), \"\\n\";\n"
    )
    res = php.run(solution, '{"a": 1}')
    bare = php.bare()
    assert res.outcome == bare.outcome
    assert res.stdout.endswith(",[],false]\n")


def test_plain_mode_is_the_bare_run(php):
    solution = (
        "<?php\n"
        "echo json_encode([$argv, $argc, getcwd() === __DIR__, basename(__FILE__), PHP_SAPI]), \"\\n\";\n"
        "echo strtoupper(stream_get_contents(STDIN));\n"
        "register_shutdown_function(function () { echo \"shutdown\\n\"; });\n"
        "fwrite(STDERR, \"err\\n\");\n"
        "exit(4);\n"
    )
    res = php.run(solution, '{"a": 1}', stdin="some input\n")
    assert res.outcome == php.bare(stdin="some input\n").outcome
    assert res.returncode == 4 and res.stdout.startswith('[["solution.php"],1,true,"solution.php","cli"]\nSOME INPUT\n')


def test_no_solution_function_passes_output_and_status_through(php):
    res = php.run("<?php\necho \"no function here\\n\";\nexit(3);\n", '{"arguments": [[1, 2]]}')
    assert res.outcome == (3, "no function here\n", "")


def test_no_solution_function_runs_to_its_end(php):
    solution = "<?php\nregister_shutdown_function(function () { echo \"shutdown\\n\"; });\n$solution = 42;\necho \"done\\n\";\n"
    assert php.run(solution, '{"arguments": [[1, 2]]}').outcome == (0, "done\nshutdown\n", "")


def test_an_error_while_loading_passes_through_as_bare(php):
    solution = "<?php\necho \"before\\n\";\nthrow new RuntimeException('while loading');\n" + ADD[6:]
    res = php.run(solution, '{"arguments": [[1, 2]]}')
    bare = php.bare()
    assert (res.returncode, res.stdout) == (255, "before\n")
    assert "PHP Fatal error:  Uncaught RuntimeException: while loading in " in res.stderr
    assert "harness" not in res.stderr and "prepend" not in res.stderr
    assert res.outcome == bare.outcome


def test_uncaught_exception_in_plain_mode(php):
    solution = "<?php\nfunction f() {\n    throw new Exception('boom');\n}\necho \"before\\n\";\nf();\n"
    res = php.run(solution)
    bare = php.bare()
    assert (res.returncode, res.stdout) == (255, "before\n")
    assert "Uncaught Exception: boom in " in res.stderr and "#0 " in res.stderr
    assert res.outcome == bare.outcome


@pytest.mark.parametrize("asserts", [None, '{"arguments": [[1, 2]]}'], ids=["plain", "harness"])
def test_parse_error_is_reported_as_bare(php, asserts):
    res = php.run("<?php\nfunction broken( {\n", asserts)
    bare = php.bare()
    assert res.returncode == 255 and "PHP Parse error:" in res.stderr
    assert res.outcome == bare.outcome


def test_exit_status_in_plain_mode(php):
    assert php.run("<?php\nexit(3);\n").returncode == 3
    res = php.run("<?php\nexit('bye');\n")
    assert (res.returncode, res.stdout) == (0, "bye")


def test_state_is_kept_between_calls(php):
    assert php.run("<?php\nfunction solution() { static $n = 0; return ++$n; }\n", '{"arguments": [[], [], []]}').values() == [1, 2, 3]


def test_late_output_cannot_follow_the_report(php):
    solution = (
        "<?php\n"
        "class Noisy { function __destruct() { echo \"destructor\\n\"; } }\n"
        "$keep = new Noisy();\n"
        "register_shutdown_function(function () { echo \"shutdown\\n\"; exit(5); });\n"
        "function solution() { return 1; }\n"
    )
    harnesscase.assert_late_output_cannot_follow_the_report(php, solution)


def test_nothing_is_written_to_the_workspace(php):
    harnesscase.assert_nothing_is_written_to_the_workspace(php, ADD)


def test_mbstring_is_there(php):
    res = php.run("<?php\nfunction solution($s) { return [mb_strlen($s), mb_strtoupper($s)]; }\n", '{"arguments": [["привет"]]}')
    assert res.values() == [[6, "ПРИВЕТ"]], res.stderr


def test_a_fatal_error_in_a_call_is_an_error_of_that_call(php):
    solution = (
        "<?php\n"
        "function solution($n) {\n"
        "    echo \"n=$n\\n\";\n"
        "    if ($n === 2) { ini_set('memory_limit', '8M'); $a = str_repeat('x', 32 * 1024 * 1024); }\n"
        "    return $n;\n"
        "}\n"
    )
    res = php.run(solution, '{"arguments": [[1], [2], [3]]}')
    assert res.returncode == 0
    # the size PHP asked for last is its version's allocator's (33554464 before, 33558528 in 8.2.36)
    items = [(i["type"], re.sub(r"allocate \d+ bytes", "allocate N bytes", i["value"]) if i["type"] == "error" else i["value"], i["output"]) for i in res.items()]
    assert items == [
        ("result", 1, "n=1\n"),
        ("error", "Fatal error: Allowed memory size of 8388608 bytes exhausted (tried to allocate N bytes)", "n=2\n"),
        ("result", 3, "n=3\n"),
    ]
    assert "PHP Fatal error:  Allowed memory size" in res.stderr


def test_a_prestarted_harness_given_up_before_its_request_runs_nothing(tmp_path):
    ws = harnesscase.workspace(tmp_path, "php", "solution.php", PHP, prestarted=True)
    (ws.check / "solution.php").write_text("<?php echo 'ran';\n")
    go_r, go_w = os.pipe()
    os.close(go_w)  # end-of-file, no byte: kiln closed the slot unused
    done = subprocess.run(["/bin/sh", "-e", "-c", ws.command], cwd=ws.root, close_fds=False, preexec_fn=lambda: harnesscase.go_on_fd_3(go_r), capture_output=True, timeout=60)
    os.close(go_r)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
