"""dart through the real HTTP API and the real sandbox: the Dart VM runs the client's
lib/checker.dart, which imports package:check/solution.dart (langs/dart).

Skipped where no Dart SDK is installed: Debian 12 has no package for it, and the machines this
project runs on reach no registry that ships it (langs/dart/README.md).

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import json

import langcase

pytestmark = langcase.only("dart")
DART = langcase.LANGS["dart"]


# the client harness Codebattle generates for Dart (its checker): dart:convert, dart:async and package:check/solution.dart.
CODEBATTLE_STYLE_HARNESS = """import 'dart:convert';
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


def test_a_codebattle_style_client_harness(lang_server):
    body = DART.run(lang_server, DART.solution, client_harness=CODEBATTLE_STYLE_HARNESS)
    assert body["exit_code"] == 0, body
    assert json.loads(body["stdout"]) == {"type": "result", "value": 3, "output": "", "time": 0}
