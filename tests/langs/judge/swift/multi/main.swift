var numbers: [Int] = []
while let line = readLine() {
    numbers += line.split(separator: " ").compactMap { Int($0) }
}
print(add(numbers[0], numbers[1]))
