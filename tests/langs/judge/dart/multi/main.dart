import 'dart:io';

import 'adder.dart';

void main() {
  final numbers = <int>[];
  String? line;
  while ((line = stdin.readLineSync()) != null) {
    numbers.addAll(line!.split(' ').where((s) => s.isNotEmpty).map(int.parse));
  }
  print(add(numbers[0], numbers[1]));
}
