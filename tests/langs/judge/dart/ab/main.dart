import 'dart:io';

void main() {
  final numbers = <int>[];
  String? line;
  while ((line = stdin.readLineSync()) != null) {
    numbers.addAll(line!.split(' ').where((s) => s.isNotEmpty).map(int.parse));
  }
  print(numbers[0] + numbers[1]);
}
