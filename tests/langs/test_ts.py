"""ts through the real HTTP API and the real sandbox: langs/ts's harness compiles the TypeScript
(sent as solution_text, written to check/solution.js) with esbuild and runs it as the js harness
does: the default export per argument list, the harness protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kilntest import REPO, Server

SLUG = "ts"
EXAMPLE = (Path(__file__).parent / "examples" / SLUG / "solution.ts").read_text()
AB = '{"arguments": [[1, 2], [10, -3], [0, 0], [2.5, 0.25]]}'


@pytest.fixture(scope="module")
def server():
    if not Path("/usr/bin/node").exists():
        pytest.skip("ts: /usr/bin/node is not installed: run langs/ts/install.sh")
    if not (REPO / "langs" / "ts" / "node_modules" / "esbuild").is_dir():
        pytest.skip("ts: langs/ts/node_modules is not installed: run langs/ts/install.sh")
    instance = Server({"RUN_LANGS": SLUG, "RUN_CONCURRENCY": "2"}).wait_ready()
    yield instance
    instance.stop()


def run(server, solution: str, asserts: str | None = None, timeout: str = "30s", **fields) -> dict:
    response = server.run(lang_slug=SLUG, solution_text=solution, asserts=asserts, timeout=timeout, **fields)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert (body["exit_code"], body["stats"]["outcome"]) == (0, "exited"), body
    assert body["stdout"].endswith("\n") and body["stdout"].count("\n") == 1, body["stdout"]
    got = json.loads(body["stdout"])
    for item in got:
        if item["type"] != "output":
            assert len(item["time"].split(".")[1]) == 7 and float(item["time"]) >= 0
    return got


def test_a_plus_b_with_the_example_solution(server):
    body = run(server, EXAMPLE, AB)
    assert body["stderr"] == ""
    assert [(i["type"], i["value"], i["output"]) for i in items(body)] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 7, "adding 10 and -3\n"),
        ("result", 0, "adding 0 and 0\n"),
        ("result", 2.75, "adding 2.5 and 0.25\n"),
    ]


def test_a_runtime_error_in_one_call_leaves_the_others(server):
    solution = "export default (a: number, b: number): number => {\n  if (b === 0) throw new RangeError('b is zero');\n  return Math.trunc(a / b);\n};\n"
    got = items(run(server, solution, '{"arguments": [[7, 2], [1, 0], [9, 3]]}'))
    assert [(i["type"], i["value"]) for i in got] == [("result", 3), ("error", "b is zero"), ("result", 3)]


def test_output_is_captured_per_call(server):
    solution = "console.log('loading');\nexport default (n: number): number => {\n  console.log(`call ${n}`);\n  return n;\n};\n"
    got = items(run(server, solution, '{"arguments": [[1], [2]]}'))
    assert [(i["type"], i.get("output"), i["value"]) for i in got] == [
        ("output", None, "loading\n"),
        ("result", "call 1\n", 1),
        ("result", "call 2\n", 2),
    ]


def test_an_infinite_loop_times_out(server):
    body = run(server, "export default (): never => {\n  for (;;) {}\n};\n", '{"arguments": [[]]}', timeout="2s")
    assert (body["stats"]["outcome"], body["exit_code"]) == ("timed_out", None)


def test_a_compile_error_is_a_non_zero_exit_with_esbuilds_message(server):
    body = run(server, "let a x = 1;\n", '{"arguments": [[]]}')
    assert (body["exit_code"], body["stdout"]) == (1, "")
    assert '[ERROR] Expected ";" but found "x"' in body["stderr"] and "solution.js:1:6:" in body["stderr"]


def test_the_original_runner_payload_runs_as_a_plain_program(server):
    solution = "import * as fs from 'fs';\nconst data: { a: number; b: number } = JSON.parse(fs.readFileSync('asserts.json', 'utf8'));\nconsole.log(data.a + data.b);\n"
    body = run(server, solution, '{"a": 2, "b": 3}')
    assert (body["exit_code"], body["stdout"], body["stderr"]) == (0, "5\n", "")


def test_plain_program_errors_and_status(server):
    body = run(server, "console.log('before');\nthrow new Error('boom');\n")
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert "Error: boom" in body["stderr"] and "/sandbox/check/solution.js:2" in body["stderr"]
    assert run(server, "process.exit(3);\n")["exit_code"] == 3


def test_lodash_and_rambda_are_importable(server):
    solution = "import _ from 'lodash';\nimport * as R from 'rambda';\nexport default (xs: number[]) => [_.sum(xs), R.sum(xs), R.map((x: number) => x * 2, xs)];\n"
    got = items(run(server, solution, '{"arguments": [[[1, 2, 3]]]}'))
    assert got[0]["value"] == [6, 6, [2, 4, 6]]
