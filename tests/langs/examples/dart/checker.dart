// An example kiln checker for Dart. kiln writes it to lib/checker.dart next to the client's
// lib/solution.dart and runs `dart --packages=.dart_tool/package_config.json lib/checker.dart`.
//
// It calls solution(a, b) for each pair below and prints the harness protocol, one JSON array:
//   [{"type":"result","value":3,"time":"0.0000123","output":""}, ...]
// A call that throws is an item {"type":"error","value":"<error.toString()>",...} and the other
// calls still run. What a call prints with print() is captured per call (a Zone's print hook;
// stdout.write goes straight to the real stdout). Only the SDK is needed: dart:convert encodes.
import 'dart:async';
import 'dart:convert';

import 'package:check/solution.dart';

const cases = [
  [1, 2],
  [3, 4],
  [10, -7],
  [0, 0],
];

void main() {
  final items = [for (final args in cases) call(() => solution(args[0], args[1]))];
  print(jsonEncode(items));
}

/// Runs one call and returns its protocol item.
Map<String, Object?> call(Object? Function() body) {
  final output = StringBuffer();
  final watch = Stopwatch();
  var type = 'result';
  Object? value;
  runZoned(() {
    watch.start();
    try {
      value = body();
    } catch (error) {
      type = 'error';
      value = error.toString();
    } finally {
      watch.stop();
    }
  }, zoneSpecification: ZoneSpecification(print: (self, parent, zone, line) => output.writeln(line)));
  return {
    'type': type,
    'value': encodable(value),
    'time': (watch.elapsedMicroseconds / 1e6).toStringAsFixed(7),
    'output': output.toString(),
  };
}

/// The value itself when jsonEncode takes it (numbers, strings, bools, null, lists and maps of
/// those, objects with toJson()), else its toString().
Object? encodable(Object? value) {
  try {
    jsonEncode(value);
    return value;
  } on JsonUnsupportedObjectError {
    return value.toString();
  }
}
