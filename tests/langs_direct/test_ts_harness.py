"""langs/ts: its test command and check/harness.js (esbuild + the js harness), run directly (no
kiln, no sandbox)."""

from __future__ import annotations

import json

import pytest

import harnesscase
from harnesscase import assert_reports, report

ADD = harnesscase.HARNESSES["ts"].add


@pytest.fixture(params=["test", "prestart"])
def ts(tmp_path, request) -> harnesscase.Workspace:
    """Every case twice: the test command, and the prestart command released by kiln's go byte
    (a prestarted slot must behave exactly as a plain one)."""
    return harnesscase.harness_workspace("ts", tmp_path, prestarted=request.param == "prestart")

def test_the_js_harness_is_the_js_workspaces(ts):
    """check/js-harness.js is a copy of langs/js/check/harness.js: keep them the same."""
    assert (ts.check / "js-harness.js").read_bytes() == (harnesscase.LANGS / "js" / "check" / "harness.js").read_bytes()


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


def test_values_are_serialised_as_for_js(ts):
    solution = "export default (kind: string): unknown => ({ undef: undefined, big: 2n ** 70n, obj: { a: [1, { b: undefined }] }, text: 'привет' } as Record<string, unknown>)[kind];\n"
    kinds = ["undef", "big", "obj", "text"]
    res = ts.run(solution, json.dumps({"arguments": [[k] for k in kinds]}))
    assert res.values() == [None, 2**70, {"a": [1, {}]}, "привет"]


def test_promises_are_awaited(ts):
    solution = "export default async (x: number): Promise<number> => {\n  await new Promise((r) => setTimeout(r, 5));\n  return x * 2;\n};\n"
    assert ts.run(solution, '{"arguments": [[1], [3]]}').values() == [2, 6]


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


def test_lodash_and_rambda_are_requirable(ts):
    solution = (
        "const _ = require('lodash');\n"
        "import { sum, map } from 'rambda';\n"
        "export default (xs: number[]) => [_.sum(xs), sum(xs), _.chunk(xs, 2), map((x: number) => x * 2, xs)];\n"
    )
    assert_reports(ts.run(solution, '{"arguments": [[[1, 2, 3]]]}'), ("result", [6, 6, [[1, 2], [3]], [2, 4, 6]]))