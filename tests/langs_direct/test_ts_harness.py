"""langs/ts: its test command and check/harness.js (esbuild + the js harness), run directly (no
kiln, no sandbox)."""

from __future__ import annotations

import json

import pytest

import harnesscase
from harnesscase import assert_reports, report

NODE = "/usr/bin/node"
ADD = "function solution(a: number, b: number): number {\n  return a + b;\n}\n\nexport default solution;\n"

# The original runner's payload: a plain script that reads asserts.json itself.
RUNNER_PAYLOAD = """import * as fs from 'fs';

const data: { a: number; b: number } = JSON.parse(fs.readFileSync('asserts.json', 'utf8'));
console.log(data.a + data.b);
"""


@pytest.fixture(scope="session")
def ts_install():
    """Runs langs/ts/install.sh once per session (None without node)."""
    return harnesscase.install("ts", NODE)


@pytest.fixture(params=["test", "prestart"])
def ts(tmp_path, ts_install, request):
    """Every case twice: the test command, and the prestart command released by kiln's go byte."""
    if ts_install is None:
        pytest.skip(f"{NODE} is not installed")
    modules = harnesscase.LANGS / "ts" / "node_modules"
    if not (modules / "esbuild").is_dir():
        pytest.skip(f"langs/ts/node_modules is absent: langs/ts/install.sh exited {ts_install.returncode}: {ts_install.stdout.strip()} {ts_install.stderr.strip()[-2000:]}")
    root = harnesscase.copy_workspace("ts", tmp_path)
    (root / "node_modules").symlink_to(modules, target_is_directory=True)  # kiln mounts the workspace with it
    return harnesscase.Workspace(root, "solution.js", prestarted=request.param == "prestart")


def test_test_command_is_one_simple_line(ts):
    flag = " --prestarted" if ts.prestarted else ""
    assert ts.command == f"/usr/bin/node check/harness.js{flag}\n"
    harnesscase.assert_simple_test_target(ts)


def test_the_js_harness_is_the_js_workspaces(ts):
    """check/js-harness.js is a copy of langs/js/check/harness.js: keep them the same."""
    assert (ts.check / "js-harness.js").read_bytes() == (harnesscase.LANGS / "js" / "check" / "harness.js").read_bytes()


def test_a_plus_b_over_several_argument_lists(ts):
    harnesscase.assert_a_plus_b(ts, ADD)


def test_an_error_in_one_call_does_not_stop_the_others(ts):
    solution = "export default (a: number, b: number): number => {\n  if (b === 0) throw new RangeError('b is zero');\n  return a / b;\n};\n"
    res = ts.run(solution, '{"arguments": [[8, 2], [1, 0], [9, 3]]}')
    assert_reports(res, ("result", 4), ("error", "b is zero"), ("result", 3))


def test_typescript_features(ts):
    solution = (
        "import _ from 'lodash';\n"
        "import * as R from 'rambda';\n"
        "enum Kind { Sum = 'sum', Product = 'product' }\n"
        "interface Box<T> { value: T }\n"
        "type Pair = [number, number];\n"
        "namespace Util { export const twice = (x: number): number => 2 * x; }\n"
        "class Acc {\n  constructor(private readonly start: number) {}\n  add(xs: number[]): number { return this.start + _.sum(xs); }\n}\n"
        "const box = <T,>(value: T): Box<T> => ({ value });\n"
        "export default function solution(kind: Kind, [a, b]: Pair): Box<number> {\n"
        "  const n = kind === Kind.Sum ? new Acc(0).add([a, b]) : R.product([a, b]);\n"
        "  return box(Util.twice(n as number)!);\n"
        "}\n"
    )
    res = ts.run(solution, '{"arguments": [["sum", [2, 3]], ["product", [2, 3]]]}')
    assert res.returncode == 0, res.stderr
    assert res.values() == [{"value": 10}, {"value": 12}]


@pytest.mark.parametrize(
    "export",
    [
        "export default solution;",
        "export = solution;",
        "module.exports = solution;",
        "module.exports.solution = solution;",
        "export { solution };",
    ],
    ids=["export-default", "export-equals", "module.exports", "exports.solution", "named"],
)
def test_ways_of_exporting_the_solution(ts, export):
    res = ts.run(f"function solution(a: number, b: number): number {{ return a * b; }}\n{export}\n", '{"arguments": [[6, 7]]}')
    assert res.masked() == report(("result", 42)), res.stderr


def test_output_is_captured_per_call(ts):
    solution = (
        "export default (n: number): number => {\n"
        "  console.log('log', n);\n"
        "  process.stdout.write(`write ${n}\\n`);\n"
        "  if (n === 2) throw new Error('after printing');\n"
        "  return n;\n"
        "};\n"
    )
    harnesscase.assert_output_per_call(ts, solution, [f"log {n}\nwrite {n}\n" for n in (1, 2, 3)])


def test_output_while_loading_comes_first(ts):
    harnesscase.assert_loading_output_comes_first(ts, "console.log('loading');\n" + ADD, "loading\n")


def test_values_are_serialised_as_for_js(ts):
    solution = "export default (kind: string): unknown => ({ undef: undefined, big: 2n ** 70n, obj: { a: [1, { b: undefined }] }, text: 'привет' } as Record<string, unknown>)[kind];\n"
    kinds = ["undef", "big", "obj", "text"]
    res = ts.run(solution, json.dumps({"arguments": [[k] for k in kinds]}))
    assert res.values() == [None, 2**70, {"a": [1, {}]}, "привет"]


def test_promises_are_awaited(ts):
    solution = "export default async (x: number): Promise<number> => {\n  await new Promise((r) => setTimeout(r, 5));\n  return x * 2;\n};\n"
    assert ts.run(solution, '{"arguments": [[1], [3]]}').values() == [2, 6]


def test_plain_mode_without_asserts_json(ts):
    res = ts.run("const greeting: string = 'hello';\nconsole.log(greeting, require.main === module, process.argv.length);\n")
    assert res.outcome == (0, "hello true 2\n", "")


@pytest.mark.parametrize(
    "asserts",
    ['{"a": 2, "b": 3}', "[[1, 2]]", '{"arguments": [1, 2]}', '{"arguments": [[1, 2]]', ""],
    ids=["other-object", "list", "list-of-numbers", "invalid", "empty"],
)
def test_plain_mode_when_asserts_are_not_of_the_shape(ts, asserts):
    assert ts.run(ADD + "console.log('plain', require.main === module);\n", asserts).outcome == (0, "plain true\n", "")


def test_the_original_runner_payload(ts):
    harnesscase.assert_runner_payload_runs(ts, RUNNER_PAYLOAD)


@pytest.mark.parametrize("asserts", [None, '{"arguments": [[1, 2]]}'], ids=["plain", "harness"])
def test_a_compile_error_is_esbuilds_message_and_status_1(ts, asserts):
    res = ts.run("console.log('never');\nlet a x = 1;\n", asserts)
    assert (res.returncode, res.stdout) == (1, "")
    assert '[ERROR] Expected ";" but found "x"' in res.stderr
    assert "solution.js:2:6:" in res.stderr


def test_stack_traces_name_the_typescript_lines(ts):
    solution = "interface A {\n  x: number;\n}\nfunction f(): never {\n  throw new Error('boom');\n}\nconsole.log('before');\nf();\n"
    res = ts.run(solution)
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert "Error: boom\n    at f (" in res.stderr
    assert "solution.js:5:" in res.stderr and "solution.js:8:" in res.stderr


def test_an_error_while_loading_passes_through(ts):
    res = ts.run("console.log('before');\nthrow new TypeError('while loading');\n" + ADD, '{"arguments": [[1, 2]]}')
    assert (res.returncode, res.stdout) == (1, "before\n")
    assert "TypeError: while loading" in res.stderr and "solution.js:2" in res.stderr


def test_no_solution_function_passes_output_and_status_through(ts):
    res = ts.run("console.log('no function here');\nprocess.exit(3);\n", '{"arguments": [[1, 2]]}')
    assert res.outcome == (3, "no function here\n", "")


def test_exit_status_in_plain_mode(ts):
    assert ts.run("process.exitCode = 5;\n").returncode == 5


def test_lodash_and_rambda_are_requirable(ts):
    solution = (
        "const _ = require('lodash');\n"
        "import { sum, map } from 'rambda';\n"
        "export default (xs: number[]) => [_.sum(xs), sum(xs), _.chunk(xs, 2), map((x: number) => x * 2, xs)];\n"
    )
    assert_reports(ts.run(solution, '{"arguments": [[[1, 2, 3]]]}'), ("result", [6, 6, [[1, 2], [3]], [2, 4, 6]]))


def test_nothing_is_written_to_the_workspace(ts):
    harnesscase.assert_nothing_is_written_to_the_workspace(ts, ADD)
