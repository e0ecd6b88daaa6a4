"""langs/js: its test command and check/harness.js, run directly (no kiln, no sandbox)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import harnesscase
from harnesscase import INVALID_JSON, NOT_THE_SHAPE, assert_reports, report

NODE = "/usr/bin/node"
ADD = "module.exports = (a, b) => a + b;\n"

# The original runner's payload: a plain script that reads asserts.json itself.
RUNNER_PAYLOAD = """const fs = require('fs');
const data = JSON.parse(fs.readFileSync('asserts.json', 'utf8'));
console.log(data.a + data.b);
"""


@pytest.fixture(scope="session")
def js_install() -> subprocess.CompletedProcess | None:
    """Runs langs/js/install.sh once per session (None without node)."""
    return harnesscase.install("js", NODE)


@pytest.fixture(params=["test", "prestart"])
def js_ws(tmp_path: Path, js_install: subprocess.CompletedProcess | None, request) -> harnesscase.Workspace:
    """Every case twice: the test command, and the prestart command released by kiln's go byte."""
    if js_install is None:
        pytest.skip(f"{NODE} is not installed")
    root = harnesscase.copy_workspace("js", tmp_path)
    modules = harnesscase.LANGS / "js" / "node_modules"
    if modules.is_dir():  # kiln mounts the workspace with it: here a link does
        (root / "node_modules").symlink_to(modules, target_is_directory=True)
    return harnesscase.Workspace(root, "solution.js", NODE, prestarted=request.param == "prestart")


@pytest.fixture
def js_node_modules(js_ws: harnesscase.Workspace, js_install: subprocess.CompletedProcess) -> Path:
    """The workspace's node_modules; skips (saying why) when langs/js/install.sh could not install it."""
    modules = js_ws.root / "node_modules"
    if not modules.is_dir():
        pytest.skip(
            f"langs/js/node_modules is absent: langs/js/install.sh exited {js_install.returncode}: "
            f"{js_install.stdout.strip()} {js_install.stderr.strip()[-2000:]}"
        )
    return modules


def _stack_free(stderr: str) -> str:
    """stderr without stack frame lines and pids (the frames below the solution's differ)."""
    kept = [line for line in stderr.splitlines() if not line.startswith("    at ")]
    return re.sub(r"^\(node:\d+\)", "(node:PID)", "\n".join(kept), flags=re.M)


def _same_as_bare(res: harnesscase.Result, bare: harnesscase.Result) -> bool:
    """The same status, stdout and stderr, stack frames and pids aside."""
    return (res.returncode, res.stdout, _stack_free(res.stderr)) == (bare.returncode, bare.stdout, _stack_free(bare.stderr))


def test_test_command_is_one_simple_line(js_ws):
    flag = " --prestarted" if js_ws.prestarted else ""
    assert js_ws.command == f"/usr/bin/node check/harness.js{flag}\n"
    harnesscase.assert_simple_test_target(js_ws)


def test_a_plus_b_over_several_argument_lists(js_ws):
    harnesscase.assert_a_plus_b(js_ws, ADD)


def test_an_error_in_one_call_does_not_stop_the_others(js_ws):
    solution = "module.exports = (a, b) => { if (b === 0) throw new RangeError('b is zero'); return a / b; };\n"
    res = js_ws.run(solution, '{"arguments": [[8, 2], [1, 0], [9, 3]]}')
    assert_reports(res, ("result", 4), ("error", "b is zero"), ("result", 3))


def test_error_messages(js_ws):
    solution = (
        "module.exports = (kind) => {\n"
        "  if (kind === 'type') return null.field;\n"
        "  if (kind === 'string') throw 'just a string';\n"
        "  if (kind === 'object') throw { code: 1 };\n"
        "  if (kind === 'exit') process.exit(3);\n"
        "};\n"
    )
    res = js_ws.run(solution, '{"arguments": [["type"], ["string"], ["object"], ["exit"]]}')
    assert res.returncode == 0
    assert [(i["type"], i["value"]) for i in res.items()] == [
        ("error", "Cannot read properties of null (reading 'field')"),
        ("error", "just a string"),
        ("error", "[object Object]"),
        ("error", "process.exit(3)"),
    ]


def test_output_is_captured_per_call(js_ws):
    solution = (
        "module.exports = (n) => {\n"
        "  console.log('log', n);\n"
        "  process.stdout.write('write ' + n + '\\n');\n"
        "  process.stdout.write(Buffer.from('buffer\\n'));\n"
        "  console.info({ n });\n"
        "  if (n === 2) throw new Error('after printing');\n"
        "  return n;\n"
        "};\n"
    )
    harnesscase.assert_output_per_call(js_ws, solution, [f"log {n}\nwrite {n}\nbuffer\n{{ n: {n} }}\n" for n in (1, 2, 3)])


def test_stderr_is_left_alone(js_ws):
    harnesscase.assert_stderr_left_alone(js_ws, "module.exports = () => { console.error('to stderr'); return 1; };\n")


def test_output_while_loading_comes_first(js_ws):
    harnesscase.assert_loading_output_comes_first(js_ws, "console.log('loading');\nconsole.log('twice');\n" + ADD, "loading\ntwice\n")


def test_no_output_item_without_output_while_loading(js_ws):
    harnesscase.assert_no_output_item_without_output_while_loading(js_ws, ADD)


@pytest.mark.parametrize(
    "export",
    [
        "module.exports = solution;",
        "module.exports.solution = solution;",
        "module.exports = { solution, other: 1 };",
        "module.exports.default = solution;",
        "Object.defineProperty(exports, '__esModule', { value: true }); exports.default = solution;",
    ],
    ids=["exports", "exports.solution", "object", "exports.default", "ts-default"],
)
def test_ways_of_exporting_the_solution(js_ws, export):
    res = js_ws.run(f"function solution(a, b) {{ return a * b; }}\n{export}\n", '{"arguments": [[6, 7]]}')
    assert res.masked() == report(("result", 42))


def test_es_module_default_export(js_ws):
    res = js_ws.run("export default function solution(a) { return a * 2; }\n", '{"arguments": [[21]]}')
    assert res.masked() == report(("result", 42))


def test_values_are_serialised_naturally(js_ws):
    solution = (
        "module.exports = (kind) => ({\n"
        "  undef: undefined, nul: null, nan: NaN, obj: { a: [1, { b: undefined }] },\n"
        "  big: 2n ** 70n, text: 'привет \"q\"', date: new Date(0), fn: () => 1,\n"
        "})[kind];\n"
    )
    kinds = ["undef", "nul", "nan", "obj", "big", "text", "date", "fn"]
    res = js_ws.run(solution, json.dumps({"arguments": [[k] for k in kinds]}))
    assert res.returncode == 0
    assert res.values() == [None, None, None, {"a": [1, {}]}, 2**70, 'привет "q"', "1970-01-01T00:00:00.000Z", None]
    assert '"value":1180591620717411303424,' in res.stdout  # BigInt: exact
    assert '"value":"привет \\"q\\""' in res.stdout


def test_promises_are_awaited(js_ws):
    solution = (
        "module.exports = async (x) => {\n"
        "  await new Promise((resolve) => setTimeout(resolve, 5));\n"
        "  console.log('waited', x);\n"
        "  if (x < 0) throw new Error('negative');\n"
        "  return x * 2;\n"
        "};\n"
    )
    res = js_ws.run(solution, '{"arguments": [[1], [-1], [3]]}')
    assert_reports(res, ("result", 2, "waited 1\n"), ("error", "negative", "waited -1\n"), ("result", 6, "waited 3\n"))


def test_plain_mode_without_asserts_json(js_ws):
    res = js_ws.run("console.log('hello', require.main === module, process.argv.length);\n")
    assert res.outcome == (0, "hello true 2\n", "")


@pytest.mark.parametrize("asserts", NOT_THE_SHAPE)
def test_plain_mode_when_asserts_are_not_of_the_shape(js_ws, asserts):
    assert js_ws.run(ADD + "console.log('plain', require.main === module);\n", asserts).outcome == (0, "plain true\n", "")


@pytest.mark.parametrize("asserts", INVALID_JSON)
def test_plain_mode_when_asserts_are_invalid_json(js_ws, asserts):
    assert js_ws.run(ADD + "console.log('plain');\n", asserts).outcome == (0, "plain\n", "")


def test_the_original_runner_payload(js_ws):
    harnesscase.assert_runner_payload_runs(js_ws, RUNNER_PAYLOAD)


def test_plain_mode_is_the_bare_run(js_ws):
    solution = (
        "const path = require('path');\n"
        "console.log(require.main === module, process.argv[1] === __filename, process.cwd() === __dirname);\n"
        "console.log(path.basename(__filename), module.id, typeof module.exports);\n"
        # stdin is read from the timer on: whether data or a 0 ms timer comes first is a race
        "setTimeout(() => {\n"
        "  console.log('timeout');\n"
        "  process.stdin.on('data', (d) => process.stdout.write(String(d).toUpperCase()));\n"
        "}, 0);\n"
        "process.nextTick(() => console.log('tick'));\n"
        "Promise.resolve().then(() => console.log('microtask'));\n"
        "console.error('err');\n"
        "process.exitCode = 4;\n"
    )
    res = js_ws.run(solution, '{"a": 1}', stdin="some input\n")
    assert res.outcome == js_ws.bare(stdin="some input\n").outcome
    assert res.returncode == 4 and res.stdout.startswith("true true true\nsolution.js . object\n")
    assert res.stdout.endswith("tick\nmicrotask\ntimeout\nSOME INPUT\n")


def test_no_solution_function_passes_output_and_status_through(js_ws):
    res = js_ws.run("console.log('no function here');\nprocess.exit(3);\n", '{"arguments": [[1, 2]]}')
    assert res.outcome == (3, "no function here\n", "")


def test_no_solution_function_runs_on_as_a_script(js_ws):
    solution = "module.exports = 42;\nconsole.log('loaded');\nsetTimeout(() => console.log('later'), 5);\nprocess.exitCode = 2;\n"
    assert js_ws.run(solution, '{"arguments": [[1, 2]]}').outcome == (2, "loaded\nlater\n", "")


def test_an_error_while_loading_passes_through(js_ws):
    res = js_ws.run("console.log('before');\nthrow new TypeError('while loading');\n" + ADD, '{"arguments": [[1, 2]]}')
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert "TypeError: while loading" in res.stderr
    assert "solution.js:2" in res.stderr
    assert "harness.js" not in res.stderr


def test_uncaught_exception_in_plain_mode(js_ws):
    res = js_ws.run("function f() {\n  throw new Error('boom');\n}\nconsole.log('before');\nf();\n")
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert "Error: boom\n    at f (" in res.stderr and "solution.js:2:" in res.stderr
    assert "harness.js" not in res.stderr
    assert _same_as_bare(res, js_ws.bare())


def test_syntax_error_in_plain_mode(js_ws):
    res = js_ws.run("function (\n")
    assert res.returncode == 1 and "SyntaxError" in res.stderr and "harness.js" not in res.stderr
    assert _same_as_bare(res, js_ws.bare())


def test_exit_status_in_plain_mode(js_ws):
    assert js_ws.run("process.exit(3);\n").returncode == 3
    assert js_ws.run("process.exitCode = 5;\n").returncode == 5


def test_harness_mode_requires_the_solution(js_ws):
    solution = "if (require.main === module) console.log('main');\nmodule.exports = () => require.main === module;\n"
    assert js_ws.run(solution, '{"arguments": [[]]}').masked() == report(("result", False))


def test_late_output_cannot_follow_the_report(js_ws):
    solution = (
        "process.on('exit', () => console.log('at exit'));\n"
        "module.exports = () => { setTimeout(() => console.log('late'), 50); return 1; };\n"
    )
    harnesscase.assert_late_output_cannot_follow_the_report(js_ws, solution)


def test_lodash_and_rambda_are_requirable(js_ws, js_node_modules):
    solution = (
        "const _ = require('lodash');\n"
        "const R = require('rambda');\n"
        "module.exports = (xs) => [_.sum(xs), R.sum(xs), _.chunk(xs, 2), R.map((x) => x * 2, xs)];\n"
    )
    assert_reports(js_ws.run(solution, '{"arguments": [[[1, 2, 3]]]}'), ("result", [6, 6, [[1, 2], [3]], [2, 4, 6]]))
    plain = js_ws.run("console.log(require('lodash').kebabCase('Kiln Runs'), typeof require('rambda').pipe);\n")
    assert plain.outcome == (0, "kiln-runs function\n", "")


def test_the_solution_sees_the_argv_of_the_test_command(js_ws):
    res = js_ws.run("console.log(JSON.stringify(process.argv.slice(1)), typeof require('fs').fstatSync)\n")
    assert res.outcome == (0, f'["{js_ws.check / "solution.js"}"] function\n', ""), res.stderr
