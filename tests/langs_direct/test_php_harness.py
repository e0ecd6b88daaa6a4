"""langs/php: its test command and check/prepend.php, harness.php, append.php, run directly (no
kiln, no sandbox)."""

from __future__ import annotations

import json
import re

import pytest

import harnesscase
from harnesscase import assert_reports, report

ADD = harnesscase.HARNESSES["php"].add


@pytest.fixture(params=["test", "prestart"])
def php(tmp_path, request) -> harnesscase.Workspace:
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.harness_workspace("php", tmp_path, prestarted=request.param == "prestart")

def test_exit_in_a_call_is_an_error_of_that_call(php):
    solution = "<?php\nfunction solution($n) {\n    echo \"n=$n\\n\";\n    if ($n === 2) exit(3);\n    if ($n === 3) die('dying');\n    return $n;\n}\n"
    res = php.run(solution, '{"arguments": [[1], [2], [4]]}')
    assert_reports(res, ("result", 1, "n=1\n"), ("error", "exit", "n=2\n"), ("result", 4, "n=4\n"))
    res = php.run(solution, '{"arguments": [[3], [1]]}')
    assert res.masked() == report(("error", "exit", "n=3\ndying"), ("result", 1, "n=1\n"))


def test_warnings_go_to_stderr(php):
    res = php.run("<?php\nfunction solution() { $a = []; return $a['missing'] ?? 1 + $a['x']; }\n", '{"arguments": [[]]}')
    assert res.masked() == report(("result", 1))
    assert 'Warning:  Undefined array key "x"' in res.stderr


def test_text_outside_php_tags_is_output_while_loading(php):
    res = php.run("header line\n" + ADD, '{"arguments": [[1, 1]]}')
    assert res.masked() == report(("result", 2), loading="header line\n")


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