"""ts through the real HTTP API and the real sandbox: langs/ts's harness compiles the TypeScript
(sent as solution_text, written to check/solution.js) with esbuild and runs it as the js harness
does: the default export per argument list, the harness protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import langcase

pytestmark = langcase.only("ts")
TS = langcase.LANGS["ts"]


def test_plain_program_errors_and_status(lang_server):
    body = TS.run(lang_server, "console.log('before');\nthrow new Error('boom');\n")
    assert (body["exit_code"], body["stdout"]) == (1, "before\n")
    assert "Error: boom" in body["stderr"] and "/sandbox/check/solution.js:2" in body["stderr"]
    assert TS.run(lang_server, "process.exit(3);\n")["exit_code"] == 3


def test_lodash_and_rambda_are_importable(lang_server):
    solution = "import _ from 'lodash';\nimport * as R from 'rambda';\nexport default (xs: number[]) => [_.sum(xs), R.sum(xs), R.map((x: number) => x * 2, xs)];\n"
    got = TS.items(TS.run(lang_server, solution, asserts='{"arguments": [[[1, 2, 3]]]}'))
    assert got[0]["value"] == [6, 6, [2, 4, 6]]
