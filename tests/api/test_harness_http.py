"""The python and js harnesses through the real API (their details: tests/langs_direct)."""

from __future__ import annotations

import json

import pytest

ARGS = {"arguments": [[1, 2], [10, 20], [-5, 5]]}
SOLUTIONS = {
    "python": "def solution(a, b):\n    print('adding', a, b)\n    return a + b\n",
    "js": "module.exports = function solution(a, b) {\n  console.log('adding', a, b);\n  return a + b;\n};\n",
}


@pytest.mark.parametrize("slug", ["python", "js"])
def test_a_plus_b_in_the_harness_protocol(server, slug):
    body = server.run(lang_slug=slug, solution_text=SOLUTIONS[slug], asserts=ARGS).json()
    assert body["exit_code"] == 0, body
    items = json.loads(body["stdout"])
    assert [item["type"] for item in items] == ["result"] * 3
    assert [item["value"] for item in items] == [3, 30, 0]
    assert [item["output"] for item in items] == ["adding 1 2\n", "adding 10 20\n", "adding -5 5\n"]
    assert all(float(item["time"]) >= 0 for item in items)


@pytest.mark.parametrize(
    ("slug", "solution"),
    [
        ("python", "def solution(a, b):\n    if a < 0:\n        raise ValueError('negative')\n    return a + b\n"),
        ("js", "module.exports = (a, b) => { if (a < 0) throw new Error('negative'); return a + b; };\n"),
    ],
)
def test_an_error_in_one_call_leaves_the_others(server, slug, solution):
    body = server.run(lang_slug=slug, solution_text=solution, asserts=ARGS).json()
    assert body["exit_code"] == 0
    items = json.loads(body["stdout"])
    assert [item["type"] for item in items] == ["result", "result", "error"]
    assert "negative" in items[2]["value"]


@pytest.mark.parametrize(
    ("slug", "solution"),
    [
        ("python", "import json\nd = json.load(open('asserts.json'))\nprint(d['a'] + d['b'])\n"),
        ("js", "const d = require('fs').readFileSync('asserts.json', 'utf8');\nconst o = JSON.parse(d);\nconsole.log(o.a + o.b);\n"),
    ],
)
def test_plain_program_mode(server, slug, solution):
    response = server.run(lang_slug=slug, solution_text=solution, asserts='{"a": 2, "b": 3}')
    assert response.text.startswith('{"exit_code":0,"stdout":"5\\n","stderr":"","stats":{')


def test_js_solutions_may_require_lodash_and_rambda(server):
    solution = "const _ = require('lodash');\nconst R = require('rambda');\nmodule.exports = (xs) => _.sum(R.map((x) => x * 2, xs));\n"
    body = server.run(lang_slug="js", solution_text=solution, asserts={"arguments": [[[1, 2, 3]]]}).json()
    assert json.loads(body["stdout"])[0]["value"] == 12, body
