"""langs/python: its test command and check/harness.py, run directly (no kiln, no sandbox)."""

from __future__ import annotations

import json

import pytest

import harnesscase

ADD = harnesscase.HARNESSES["python"].add


@pytest.fixture(params=["test", "prestart"])
def python_ws(tmp_path, request) -> harnesscase.Workspace:
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.harness_workspace("python", tmp_path, prestarted=request.param == "prestart")

def test_values_are_serialised_naturally(python_ws):
    solution = (
        "class Thing:\n    def __repr__(self): return 'Thing()'\n"
        "def solution(kind):\n"
        "    return {\n"
        "        'tuple': (1, (2, 3)), 'set': {3, 1, 2}, 'none': None, 'bool': True,\n"
        "        'nan': float('nan'), 'inf': float('inf'), 'text': 'привет \"q\"',\n"
        "        'thing': Thing(), 'range': range(3), 'big': 2 ** 100, 1: 'int key',\n"
        "    }[kind]\n"
    )
    kinds = ["tuple", "set", "none", "bool", "nan", "inf", "text", "thing", "range", "big", 1]
    res = python_ws.run(solution, json.dumps({"arguments": [[k] for k in kinds]}))
    assert res.returncode == 0
    assert res.values() == [[1, [2, 3]], [1, 2, 3], None, True, None, None, 'привет "q"', "Thing()", [0, 1, 2], 2**100, "int key"]
    assert '"value":"привет \\"q\\""' in res.stdout  # UTF-8, not \u escapes


def test_huge_int_result_is_a_number(python_ws):
    res = python_ws.run("def solution():\n    return 10 ** 5000\n", '{"arguments": [[]]}')
    assert res.returncode == 0
    assert res.masked() == '[{"type":"result","value":1' + "0" * 5000 + ',"time":"T","output":""}]\n'


def test_plain_mode_is_the_bare_run(python_ws):
    solution = (
        "import os, sys\n"
        "print(__name__, sys.argv, os.getcwd() == os.path.dirname(__file__), sys.path[0] == os.path.dirname(__file__))\n"
        "print(__file__.endswith('/check/solution.py'), __spec__, __package__, sorted(globals()))\n"
        "print(sys.stdin.read().upper(), end='')\n"
        "sys.stderr.write('err\\n')\n"
        "sys.exit(4)\n"
    )
    res = python_ws.run(solution, '{"a": 1}', stdin="some input\n")
    assert res.outcome == python_ws.bare(stdin="some input\n").outcome
    assert res.returncode == 4 and res.stdout.startswith("__main__ ['solution.py'] True True\n")


def test_an_error_while_loading_passes_through(python_ws):
    solution = "print('before')\nraise RuntimeError('while loading')\n" + ADD
    res = python_ws.run(solution, '{"arguments": [[1, 2]]}')
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert res.stderr.endswith("RuntimeError: while loading\n")
    assert "harness.py" not in res.stderr


def test_uncaught_exception_in_plain_mode(python_ws):
    res = python_ws.run("def f():\n    raise ValueError('boom')\n\nprint('before')\nf()\n")
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert res.stderr.startswith("Traceback (most recent call last):\n")
    assert res.stderr.endswith("ValueError: boom\n")
    assert 'solution.py", line 5, in <module>' in res.stderr
    assert "harness" not in res.stderr
    assert res.outcome == python_ws.bare().outcome


def test_syntax_error_in_plain_mode_is_reported_as_bare(python_ws):
    res = python_ws.run("def broken(:\n    pass\n")
    assert res.returncode == 1
    assert res.outcome == python_ws.bare().outcome
    assert res.stderr.endswith("SyntaxError: invalid syntax\n")


def test_harness_mode_module_is_named_solution(python_ws):
    solution = (
        "import sys\n"
        "if __name__ == '__main__':\n    print('not in harness mode')\n"
        "def solution():\n    return [__name__, sys.modules['solution'].solution is solution]\n"
    )
    assert python_ws.run(solution, '{"arguments": [[]]}').values()[0] == ["solution", True]


def test_no_bytecode_is_written_to_the_workspace(python_ws):
    (python_ws.check / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    res = python_ws.run("from helper import twice\ndef solution(x):\n    return twice(x)\n", '{"arguments": [[21]]}')
    assert res.values()[0] == 42
    assert not list(python_ws.root.rglob("*.pyc"))


def test_the_solution_sees_the_argv_and_descriptors_of_the_test_command(python_ws):
    probe = "import os, sys\nprint(sys.argv, sorted(int(fd) for fd in os.listdir('/proc/self/fd')))\n"
    res = python_ws.run(probe)
    assert res.outcome == (0, "['solution.py'] [0, 1, 2, 3]\n", ""), res.stderr  # 3: listdir's own