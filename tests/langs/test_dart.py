"""dart through the real HTTP API and the real sandbox: the Dart VM runs the client's
lib/checker.dart, which imports package:check/solution.dart (langs/dart).

Skipped where no Dart SDK is installed: Debian 12 has no package for it, and the machines this
project runs on reach no registry that ships it (langs/dart/README.md)."""

from __future__ import annotations

import json
import shutil

import pytest

import langcase
from kilntest import REPO

SOLUTION = langcase.example("dart", "solution.dart")
DART = langcase.Lang("dart", checker=langcase.example("dart", "checker.dart"), one_line=False)  # the VM compiles first
PAIRS = [[1, 2], [3, 4], [10, -7], [0, 0]]  # the example checker's


def _missing() -> str | None:
    if shutil.which("dart", path=langcase.SANDBOX_PATH) is None:
        return "no Dart SDK on this host (not packaged for Debian 12; langs/dart/README.md says how to install it)"
    if not (REPO / "langs" / "dart" / ".dart_tool" / "package_config.json").is_file():
        return "langs/dart/.dart_tool/package_config.json is missing: run langs/dart/install.sh"
    return None


@pytest.fixture(scope="module")
def server():
    yield from DART.serve(_missing())


def test_a_plus_b_with_the_example_checker(server):
    langcase.assert_a_plus_b(DART, DART.run(server, SOLUTION), PAIRS, "")


def test_an_error_in_one_call_leaves_the_others(server):
    solution = "int solution(int a, int b) {\n  if (a == 3) throw ArgumentError('three is not allowed');\n  return a - b;\n}\n"
    got = DART.items(DART.run(server, solution))
    assert [i["type"] for i in got] == ["result", "error", "result", "result"]
    assert [got[0]["value"], got[2]["value"], got[3]["value"]] == [-1, 17, 0]
    assert "three is not allowed" in got[1]["value"]


def test_output_is_captured_per_call(server):
    solution = "int solution(int a, int b) {\n  print('adding $a and $b été');\n  return a + b;\n}\n"
    got = DART.items(DART.run(server, solution))
    assert [(i["type"], i["value"], i["output"]) for i in got] == langcase.additions(PAIRS, "adding {a} and {b} été\n")


def test_a_compile_error_is_a_failed_run_with_the_compiler_message(server):
    body = DART.run(server, "int solution(int a, int b) {\n  return a + 'b';\n}\n")
    langcase.assert_compile_error(body, "solution.dart", "Error")


def test_an_infinite_loop_times_out(server):
    langcase.assert_timed_out(DART.run(server, "int solution(int a, int b) {\n  while (true) {}\n}\n", timeout="2s"))


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


def test_a_codebattle_style_checker(server):
    body = DART.run(server, SOLUTION, checker=CODEBATTLE_STYLE_CHECKER)
    assert body["exit_code"] == 0, body
    assert json.loads(body["stdout"]) == {"type": "result", "value": 3, "output": "", "time": 0}


def test_two_runs_at_once_in_both_slots(server):
    langcase.assert_four_runs_in_two_slots(DART, server, SOLUTION, [3, 7, 3, 0])
