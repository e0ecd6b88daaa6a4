"""dart through the real HTTP API and the real sandbox: the Dart VM runs the client's
lib/checker.dart, which imports package:check/solution.dart (langs/dart).

Skipped where no Dart SDK is installed: Debian 12 has no package for it, and the machines this
project runs on reach no registry that ships it (langs/dart/README.md)."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "dart"
CHECKER = (EXAMPLES / "checker.dart").read_text()
SOLUTION = (EXAMPLES / "solution.dart").read_text()
TIMEOUT = "30s"  # the VM compiles the source first: generous, these tests assert behaviour


def _missing() -> str | None:
    if shutil.which("dart", path="/usr/local/bin:/usr/bin:/bin") is None:
        return "no Dart SDK on this host (not packaged for Debian 12; langs/dart/README.md says how to install it)"
    if not (REPO / "langs" / "dart" / ".dart_tool" / "package_config.json").is_file():
        return "langs/dart/.dart_tool/package_config.json is missing: run langs/dart/install.sh"
    return None


@pytest.fixture(scope="module")
def dart():
    reason = _missing()
    if reason:
        pytest.skip(f"dart: {reason}")
    server = Server({"RUN_LANGS": "dart", "RUN_CONCURRENCY": "2"}).wait_ready()
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="dart", solution_text=solution, checker_text=checker, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(dart):
    body = run(dart, SOLUTION)
    assert body["stats"]["outcome"] == "exited"
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, ""),
        ("result", 7, ""),
        ("result", 3, ""),
        ("result", 0, ""),
    ]
    assert all(float(i["time"]) >= 0 and len(i["time"].split(".")[1]) == 7 for i in got)


def test_an_error_in_one_call_leaves_the_others(dart):
    solution = "int solution(int a, int b) {\n  if (a == 3) throw ArgumentError('three is not allowed');\n  return a - b;\n}\n"
    got = items(run(dart, solution))
    assert [i["type"] for i in got] == ["result", "error", "result", "result"]
    assert [got[0]["value"], got[2]["value"], got[3]["value"]] == [-1, 17, 0]
    assert "three is not allowed" in got[1]["value"]


def test_output_is_captured_per_call(dart):
    solution = "int solution(int a, int b) {\n  print('adding $a and $b été');\n  return a + b;\n}\n"
    got = items(run(dart, solution))
    assert [i["value"] for i in got] == [3, 7, 3, 0]
    assert [i["output"] for i in got] == [
        "adding 1 and 2 été\n",
        "adding 3 and 4 été\n",
        "adding 10 and -7 été\n",
        "adding 0 and 0 été\n",
    ]


def test_a_compile_error_is_a_failed_run_with_the_compiler_message(dart):
    body = run(dart, "int solution(int a, int b) {\n  return a + 'b';\n}\n")
    assert body["exit_code"] not in (0, None)
    assert body["stdout"] == ""
    assert "solution.dart" in body["stderr"] and "Error" in body["stderr"]


def test_an_infinite_loop_times_out(dart):
    body = run(dart, "int solution(int a, int b) {\n  while (true) {}\n}\n", timeout="2s")
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None


# Codebattle's Dart checker template: dart:convert, dart:async and package:check/solution.dart.
CODEBATTLE_STYLE_CHECKER = """import 'dart:convert';
import 'dart:async';

import 'package:check/solution.dart';

void main() {
  var asserts = [];
  var output_ = "";
  runZoned(() {
    var result_ = solution(1, 2);
    asserts.add({'type': 'result', 'value': result_, 'output': output_, 'time': 0});
  }, zoneSpecification: new ZoneSpecification(
    print: (Zone self, ZoneDelegate parent, Zone zone, String line) {
      output_ += line + "\\n";
    }
  ));
  asserts.forEach((message) => print(json.encode(message)));
}
"""


def test_a_codebattle_style_checker(dart):
    body = run(dart, SOLUTION, checker=CODEBATTLE_STYLE_CHECKER)
    assert body["exit_code"] == 0, body
    assert json.loads(body["stdout"]) == {"type": "result", "value": 3, "output": "", "time": 0}


def test_two_runs_at_once_in_both_slots(dart):
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda _: run(dart, SOLUTION), range(4)))
    for body in bodies:
        assert [i["value"] for i in items(body)] == [3, 7, 3, 0]
