"""langs/js: its test command and check/harness.js, run directly (no kiln, no sandbox)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import harnesscase
from harnesscase import assert_reports, report

ADD = harnesscase.HARNESSES["js"].add


@pytest.fixture(params=["test", "prestart"])
def js_ws(tmp_path, request) -> harnesscase.Workspace:
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.harness_workspace("js", tmp_path, prestarted=request.param == "prestart")

@pytest.fixture
def js_node_modules(js_ws: harnesscase.Workspace) -> Path:
    """The workspace's node_modules; skips (saying why) when langs/js/install.sh could not install it."""
    modules = js_ws.root / "node_modules"
    if not modules.is_dir():
        ran = harnesscase.installed("js")
        pytest.skip(f"langs/js/node_modules is absent: langs/js/install.sh exited {ran.returncode}: {harnesscase.install_said(ran)}")
    return modules


def _stack_free(stderr: str) -> str:
    """stderr without stack frame lines and pids (the frames below the solution's differ)."""
    kept = [line for line in stderr.splitlines() if not line.startswith("    at ")]
    return re.sub(r"^\(node:\d+\)", "(node:PID)", "\n".join(kept), flags=re.M)


def _same_as_bare(res: harnesscase.Result, bare: harnesscase.Result) -> bool:
    """The same status, stdout and stderr, stack frames and pids aside."""
    return (res.returncode, res.stdout, _stack_free(res.stderr)) == (bare.returncode, bare.stdout, _stack_free(bare.stderr))


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


def test_harness_mode_requires_the_solution(js_ws):
    solution = "if (require.main === module) console.log('main');\nmodule.exports = () => require.main === module;\n"
    assert js_ws.run(solution, '{"arguments": [[]]}').masked() == report(("result", False))


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
