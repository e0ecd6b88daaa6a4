var numbers: [Int] = []
while let line = readLine() {
    numbers += line.split(separator: " ").compactMap { Int($0) }
}
let sum: String = numbers[0] + numbers[1]
print(sum)
