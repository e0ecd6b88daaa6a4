"""langs/js: its test command and check/harness.js, run directly (no kiln, no sandbox)."""

from __future__ import annotations

import json
import re

import pytest

ADD = "module.exports = (a, b) => a + b;\n"

# The original runner's payload: a plain script that reads asserts.json itself.
RUNNER_PAYLOAD = """const fs = require('fs');
const data = JSON.parse(fs.readFileSync('asserts.json', 'utf8'));
console.log(data.a + data.b);
"""


def _stack_free(stderr: str) -> str:
    """stderr without stack frame lines and pids (the frames below the solution's differ)."""
    kept = [line for line in stderr.splitlines() if not line.startswith("    at ")]
    return re.sub(r"^\(node:\d+\)", "(node:PID)", "\n".join(kept), flags=re.M)


def test_test_command_is_one_simple_line(js_ws):
    assert js_ws.command == "/usr/bin/node check/harness.js\n"
    makefile = (js_ws.root / "Makefile").read_text()
    assert ".PHONY: test" in makefile
    assert re.search(r"^test:\s*$", makefile, re.M), "test must have no prerequisites"
    assert "CURDIR" not in makefile and str(js_ws.root) not in js_ws.command


def test_a_plus_b_over_several_argument_lists(js_ws):
    res = js_ws.run(ADD, '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}')
    assert res.returncode == 0, res.stderr
    assert res.masked() == (
        '[{"type":"result","value":3,"time":"T","output":""},'
        '{"type":"result","value":7,"time":"T","output":""},'
        '{"type":"result","value":0,"time":"T","output":""},'
        '{"type":"result","value":2.75,"time":"T","output":""}]\n'
    )
    assert res.stderr == ""


def test_an_error_in_one_call_does_not_stop_the_others(js_ws):
    solution = "module.exports = (a, b) => { if (b === 0) throw new RangeError('b is zero'); return a / b; };\n"
    res = js_ws.run(solution, '{"arguments": [[8, 2], [1, 0], [9, 3]]}')
    assert res.returncode == 0
    assert res.masked() == (
        '[{"type":"result","value":4,"time":"T","output":""},'
        '{"type":"error","value":"b is zero","time":"T","output":""},'
        '{"type":"result","value":3,"time":"T","output":""}]\n'
    )


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
    res = js_ws.run(solution, '{"arguments": [[1], [2], [3]]}')
    assert res.returncode == 0
    items = res.items()
    assert [i["output"] for i in items] == [f"log {n}\nwrite {n}\nbuffer\n{{ n: {n} }}\n" for n in (1, 2, 3)]
    assert [i["type"] for i in items] == ["result", "error", "result"]


def test_stderr_is_left_alone(js_ws):
    res = js_ws.run("module.exports = () => { console.error('to stderr'); return 1; };\n", '{"arguments": [[]]}')
    assert res.stderr == "to stderr\n"
    assert res.masked() == '[{"type":"result","value":1,"time":"T","output":""}]\n'


def test_output_while_loading_comes_first(js_ws):
    res = js_ws.run("console.log('loading');\nconsole.log('twice');\n" + ADD, '{"arguments": [[1, 1]]}')
    assert res.returncode == 0
    assert res.masked() == (
        '[{"type":"output","value":"loading\\ntwice\\n"},'
        '{"type":"result","value":2,"time":"T","output":""}]\n'
    )


def test_no_output_item_without_output_while_loading(js_ws):
    res = js_ws.run(ADD, '{"arguments": []}')
    assert (res.returncode, res.stdout) == (0, "[]\n")


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
    assert res.masked() == '[{"type":"result","value":42,"time":"T","output":""}]\n'


def test_es_module_default_export(js_ws):
    res = js_ws.run("export default function solution(a) { return a * 2; }\n", '{"arguments": [[21]]}')
    assert res.masked() == '[{"type":"result","value":42,"time":"T","output":""}]\n'


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
    values = [i["value"] for i in res.items()]
    assert values == [None, None, None, {"a": [1, {}]}, 2**70, 'привет "q"', "1970-01-01T00:00:00.000Z", None]
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
    assert res.returncode == 0
    assert res.masked() == (
        '[{"type":"result","value":2,"time":"T","output":"waited 1\\n"},'
        '{"type":"error","value":"negative","time":"T","output":"waited -1\\n"},'
        '{"type":"result","value":6,"time":"T","output":"waited 3\\n"}]\n'
    )


def test_plain_mode_without_asserts_json(js_ws):
    res = js_ws.run("console.log('hello', require.main === module, process.argv.length);\n")
    assert (res.returncode, res.stdout, res.stderr) == (0, "hello true 2\n", "")


@pytest.mark.parametrize(
    "asserts",
    [
        '{"a": 2, "b": 3}',
        "[[1, 2]]",
        '{"arguments": [1, 2]}',
        '{"arguments": {"a": [1]}}',
        '{"arguments": [[1], 2]}',
        '"arguments"',
        "",
    ],
    ids=["other-object", "list", "list-of-numbers", "object-arguments", "mixed", "string", "empty"],
)
def test_plain_mode_when_asserts_are_not_of_the_shape(js_ws, asserts):
    res = js_ws.run(ADD + "console.log('plain', require.main === module);\n", asserts)
    assert (res.returncode, res.stdout, res.stderr) == (0, "plain true\n", "")


@pytest.mark.parametrize("asserts", ['{"arguments": [[1, 2]]', "{arguments: [[1, 2]]}", b'{"arguments": [["\xff"]]}'])
def test_plain_mode_when_asserts_are_invalid_json(js_ws, asserts):
    res = js_ws.run(ADD + "console.log('plain');\n", asserts)
    assert (res.returncode, res.stdout, res.stderr) == (0, "plain\n", "")


def test_the_original_runner_payload(js_ws):
    res = js_ws.run(RUNNER_PAYLOAD, '{"a": 2, "b": 3}')
    assert (res.returncode, res.stdout, res.stderr) == (0, "5\n", "")


def test_plain_mode_is_the_bare_run(js_ws):
    solution = (
        "const path = require('path');\n"
        "console.log(require.main === module, process.argv[1] === __filename, process.cwd() === __dirname);\n"
        "console.log(path.basename(__filename), module.id, typeof module.exports);\n"
        "setTimeout(() => console.log('timeout'), 0);\n"
        "process.nextTick(() => console.log('tick'));\n"
        "Promise.resolve().then(() => console.log('microtask'));\n"
        "process.stdin.on('data', (d) => process.stdout.write(String(d).toUpperCase()));\n"
        "console.error('err');\n"
        "process.exitCode = 4;\n"
    )
    res = js_ws.run(solution, '{"a": 1}', stdin="some input\n")
    bare = js_ws.run_bare("/usr/bin/node", "solution.js", stdin="some input\n")
    assert (res.returncode, res.stdout, res.stderr) == (bare.returncode, bare.stdout, bare.stderr)
    assert res.returncode == 4 and res.stdout.startswith("true true true\nsolution.js . object\n")
    assert "SOME INPUT\n" in res.stdout


def test_no_solution_function_passes_output_and_status_through(js_ws):
    res = js_ws.run("console.log('no function here');\nprocess.exit(3);\n", '{"arguments": [[1, 2]]}')
    assert (res.returncode, res.stdout, res.stderr) == (3, "no function here\n", "")


def test_no_solution_function_runs_on_as_a_script(js_ws):
    solution = "module.exports = 42;\nconsole.log('loaded');\nsetTimeout(() => console.log('later'), 5);\nprocess.exitCode = 2;\n"
    res = js_ws.run(solution, '{"arguments": [[1, 2]]}')
    assert (res.returncode, res.stdout, res.stderr) == (2, "loaded\nlater\n", "")


def test_an_error_while_loading_passes_through(js_ws):
    res = js_ws.run("console.log('before');\nthrow new TypeError('while loading');\n" + ADD, '{"arguments": [[1, 2]]}')
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert "TypeError: while loading" in res.stderr
    assert "solution.js:2" in res.stderr
    assert "harness.js" not in res.stderr


def test_uncaught_exception_in_plain_mode(js_ws):
    solution = "function f() {\n  throw new Error('boom');\n}\nconsole.log('before');\nf();\n"
    res = js_ws.run(solution)
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert "Error: boom\n    at f (" in res.stderr and "solution.js:2:" in res.stderr
    assert "harness.js" not in res.stderr
    bare = js_ws.run_bare("/usr/bin/node", "solution.js")
    assert (res.returncode, res.stdout, _stack_free(res.stderr)) == (bare.returncode, bare.stdout, _stack_free(bare.stderr))


def test_syntax_error_in_plain_mode(js_ws):
    res = js_ws.run("function (\n")
    bare = js_ws.run_bare("/usr/bin/node", "solution.js")
    assert res.returncode == 1 and "SyntaxError" in res.stderr and "harness.js" not in res.stderr
    assert (res.returncode, res.stdout, _stack_free(res.stderr)) == (bare.returncode, bare.stdout, _stack_free(bare.stderr))


def test_exit_status_in_plain_mode(js_ws):
    assert js_ws.run("process.exit(3);\n").returncode == 3
    assert js_ws.run("process.exitCode = 5;\n").returncode == 5


def test_harness_mode_requires_the_solution(js_ws):
    solution = "if (require.main === module) console.log('main');\nmodule.exports = () => require.main === module;\n"
    res = js_ws.run(solution, '{"arguments": [[]]}')
    assert res.masked() == '[{"type":"result","value":false,"time":"T","output":""}]\n'


def test_late_output_cannot_follow_the_report(js_ws):
    solution = (
        "process.on('exit', () => console.log('at exit'));\n"
        "module.exports = () => { setTimeout(() => console.log('late'), 50); return 1; };\n"
    )
    res = js_ws.run(solution, '{"arguments": [[]]}')
    assert (res.returncode, res.masked()) == (0, '[{"type":"result","value":1,"time":"T","output":""}]\n')


def test_lodash_and_rambda_are_requirable(js_ws, js_node_modules):
    solution = (
        "const _ = require('lodash');\n"
        "const R = require('rambda');\n"
        "module.exports = (xs) => [_.sum(xs), R.sum(xs), _.chunk(xs, 2), R.map((x) => x * 2, xs)];\n"
    )
    res = js_ws.run(solution, '{"arguments": [[[1, 2, 3]]]}')
    assert res.returncode == 0, res.stderr
    assert res.masked() == '[{"type":"result","value":[6,6,[[1,2],[3]],[2,4,6]],"time":"T","output":""}]\n'
    plain = js_ws.run("console.log(require('lodash').kebabCase('Kiln Runs'), typeof require('rambda').pipe);\n")
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "kiln-runs function\n", "")
