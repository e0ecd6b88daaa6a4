"""langs/python: its test command and check/harness.py, run directly (no kiln, no sandbox)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import harnesscase
from harnesscase import INVALID_JSON, NOT_THE_SHAPE, assert_reports

ADD = "def solution(a, b):\n    return a + b\n"

# The original runner's payload: a plain script that reads asserts.json itself.
RUNNER_PAYLOAD = """import json

with open("asserts.json") as f:
    data = json.load(f)
print(data["a"] + data["b"])
"""


@pytest.fixture(params=["test", "prestart"])
def python_ws(tmp_path, request):
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.workspace(tmp_path, "python", "solution.py", "/usr/bin/python3", prestarted=request.param == "prestart")


def test_test_command_is_one_simple_line(python_ws):
    flag = " --prestarted" if python_ws.prestarted else ""
    assert python_ws.command == f"/usr/bin/python3 -B check/harness.py{flag}\n"
    harnesscase.assert_simple_test_target(python_ws)


def test_a_plus_b_over_several_argument_lists(python_ws):
    harnesscase.assert_a_plus_b(python_ws, ADD)


def test_an_error_in_one_call_does_not_stop_the_others(python_ws):
    res = python_ws.run("def solution(a, b):\n    return a // b\n", '{"arguments": [[7, 2], [1, 0], [9, 3]]}')
    assert_reports(res, ("result", 3), ("error", "ZeroDivisionError: integer division or modulo by zero"), ("result", 3))


def test_error_messages(python_ws):
    solution = (
        "class Custom(Exception):\n    pass\n"
        "def solution(kind):\n"
        "    if kind == 'key': return {}['missing']\n"
        "    if kind == 'custom': raise Custom('mine')\n"
        "    if kind == 'bare': raise ValueError\n"
        "    if kind == 'exit': raise SystemExit(3)\n"
    )
    res = python_ws.run(solution, '{"arguments": [["key"], ["custom"], ["bare"], ["exit"]]}')
    assert res.returncode == 0
    assert [(i["type"], i["value"]) for i in res.items()] == [
        ("error", "KeyError: 'missing'"),
        ("error", "Custom: mine"),
        ("error", "ValueError"),
        ("error", "SystemExit: 3"),
    ]


def test_output_is_captured_per_call(python_ws):
    solution = (
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
        "    return n\n"
    )
    harnesscase.assert_output_per_call(python_ws, solution, [f"print {n}\nwrite {n}\nbuffer\nfd\n" for n in (1, 2, 3)])


def test_stderr_is_left_alone(python_ws):
    harnesscase.assert_stderr_left_alone(python_ws, "import sys\ndef solution():\n    print('to stderr', file=sys.stderr)\n    return 1\n")


def test_output_while_loading_comes_first(python_ws):
    harnesscase.assert_loading_output_comes_first(python_ws, "print('loading')\nprint('twice')\n" + ADD, "loading\ntwice\n")


def test_no_output_item_without_output_while_loading(python_ws):
    harnesscase.assert_no_output_item_without_output_while_loading(python_ws, ADD)


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


def test_plain_mode_without_asserts_json(python_ws):
    res = python_ws.run("import sys\nprint('hello', sys.argv, __name__)\n")
    assert res.outcome == (0, "hello ['solution.py'] __main__\n", "")


@pytest.mark.parametrize("asserts", NOT_THE_SHAPE)
def test_plain_mode_when_asserts_are_not_of_the_shape(python_ws, asserts):
    assert python_ws.run(ADD + "print('plain', __name__)\n", asserts).outcome == (0, "plain __main__\n", "")


@pytest.mark.parametrize("asserts", INVALID_JSON)
def test_plain_mode_when_asserts_are_invalid_json(python_ws, asserts):
    assert python_ws.run(ADD + "print('plain')\n", asserts).outcome == (0, "plain\n", "")


def test_the_original_runner_payload(python_ws):
    harnesscase.assert_runner_payload_runs(python_ws, RUNNER_PAYLOAD)


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


def test_no_solution_function_passes_output_and_status_through(python_ws):
    solution = "import sys\nprint('no function here')\nsys.stdout.flush()\nsys.exit(3)\n"
    assert python_ws.run(solution, '{"arguments": [[1, 2]]}').outcome == (3, "no function here\n", "")


def test_no_solution_function_runs_to_its_end(python_ws):
    assert python_ws.run("solution = 42\nprint('done')\n", '{"arguments": [[1, 2]]}').outcome == (0, "done\n", "")


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


def test_exit_status_in_plain_mode(python_ws):
    assert python_ws.run("import sys\nsys.exit(3)\n").returncode == 3
    res = python_ws.run("import sys\nsys.exit('bye')\n")
    assert (res.returncode, res.stderr) == (1, "bye\n")


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


def test_late_output_cannot_follow_the_report(python_ws):
    solution = (
        "import atexit, threading, time\n"
        "atexit.register(print, 'at exit')\n"
        "def solution():\n"
        "    threading.Thread(target=lambda: (time.sleep(0.2), print('late'))).start()\n"
        "    return 1\n"
    )
    harnesscase.assert_late_output_cannot_follow_the_report(python_ws, solution)


def test_the_solution_sees_the_argv_and_descriptors_of_the_test_command(python_ws):
    probe = "import os, sys\nprint(sys.argv, sorted(int(fd) for fd in os.listdir('/proc/self/fd')))\n"
    res = python_ws.run(probe)
    assert res.outcome == (0, "['solution.py'] [0, 1, 2, 3]\n", ""), res.stderr  # 3: listdir's own


def test_a_prestarted_harness_given_up_before_its_request_runs_nothing(tmp_path):
    ws = harnesscase.workspace(tmp_path, "python", "solution.py", "/usr/bin/python3", prestarted=True)
    (ws.check / "solution.py").write_text("print('ran')\n")
    go_r, go_w = os.pipe()
    os.close(go_w)  # end-of-file, no byte: kiln closed the slot unused
    done = subprocess.run(["/bin/sh", "-e", "-c", ws.command], cwd=ws.root, close_fds=False, preexec_fn=lambda: harnesscase.go_on_fd_3(go_r), capture_output=True, timeout=60)
    os.close(go_r)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
