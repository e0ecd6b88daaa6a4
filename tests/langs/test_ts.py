"""ts through the real HTTP API and the real sandbox: langs/ts's harness compiles the TypeScript
(sent as solution_text, written to check/solution.js) with esbuild and runs it as the js harness
does: the default export per argument list, the harness protocol."""

from __future__ import annotations

import pytest

import langcase
from kilntest import REPO

AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'
TS = langcase.Lang("ts", timed=True)


@pytest.fixture(scope="module")
def server():
    yield from TS.serve(langcase.missing(
        "run langs/ts/install.sh",
        paths=(
            ("/usr/bin/node", "/usr/bin/node is not installed"),
            (REPO / "langs" / "ts" / "node_modules" / "esbuild", "langs/ts/node_modules is not installed"),
        ),
    ))


def test_a_plus_b_with_the_example_solution(server):
    langcase.assert_example_a_plus_b(TS, server, "solution.ts", AB)


def test_a_runtime_error_in_one_call_leaves_the_others(server):
    solution = "export default (a: number, b: number): number => {\n  if (b === 0) throw new RangeError('b is zero');\n  return Math.trunc(a / b);\n};\n"
    langcase.assert_division_by_zero_fails_alone(TS, server, solution, "b is zero")


def test_output_is_captured_per_call(server):
    solution = "console.log('loading');\nexport default (n: number): number => {\n  console.log(`call ${n}`);\n  return n;\n};\n"
    langcase.assert_output_per_call(TS, server, solution)


def test_an_infinite_loop_times_out(server):
    langcase.assert_timed_out(TS.run(server, "export default (): never => {\n  for (;;) {}\n};\n", asserts='{"arguments": [[]]}', timeout="2s"))


def test_a_compile_error_is_a_non_zero_exit_with_esbuilds_message(server):
    body = TS.run(server, "let a x = 1;\n", asserts='{"arguments": [[]]}')
    langcase.assert_compile_error(body, '[ERROR] Expected ";" but found "x"', "solution.js:1:6:", exit_code=1)


def test_the_original_runner_payload_runs_as_a_plain_program(server):
    solution = "import * as fs from 'fs';\nconst data: { a: number; b: number } = JSON.parse(fs.readFileSync('asserts.json', 'utf8'));\nconsole.log(data.a + data.b);\n"
    langcase.assert_runner_payload_runs(TS, server, solution)


def test_plain_program_errors_and_status(server):
    body = TS.run(server, "console.log('before');\nthrow new Error('boom');\n")
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert "Error: boom" in body["stderr"] and "/sandbox/check/solution.js:2" in body["stderr"]
    assert TS.run(server, "process.exit(3);\n")["exit_code"] == 3


def test_lodash_and_rambda_are_importable(server):
    solution = "import _ from 'lodash';\nimport * as R from 'rambda';\nexport default (xs: number[]) => [_.sum(xs), R.sum(xs), R.map((x: number) => x * 2, xs)];\n"
    got = TS.items(TS.run(server, solution, asserts='{"arguments": [[[1, 2, 3]]]}'))
    assert got[0]["value"] == [6, 6, [2, 4, 6]]
