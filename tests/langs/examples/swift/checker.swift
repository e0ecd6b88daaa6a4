// An example kiln checker for Swift. kiln writes it to check/checker.swift next to the client's
// check/solution.swift and builds both with `swiftc … check/solution.swift check/checker.swift`.
//
// It calls solution(a, b) for each pair below and prints the harness protocol, one JSON array:
//   [{"type":"result","value":3,"time":"0.0000123","output":""}, ...]
// What a call prints (print, putchar, write(1, …)) is captured per call: stdout is pointed at a
// temporary file for the call. Swift has no exceptions to catch: a call that traps (overflow,
// index out of range, fatalError) ends the whole checker with the signal. JSON comes from
// Foundation's JSONEncoder; `AnyResult` lets it encode whatever Encodable solution returns.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

let cases: [(Int, Int)] = [(1, 2), (3, 4), (10, -7), (0, 0)]

/// Any Encodable value, so that items of different result types share one array.
struct AnyResult: Encodable {
    private let encodeValue: (Encoder) throws -> Void
    init<T: Encodable>(_ value: T) { encodeValue = value.encode }
    func encode(to encoder: Encoder) throws { try encodeValue(encoder) }
}

/// One item of the harness protocol.
struct Item: Encodable {
    let type: String
    let value: AnyResult
    let time: String
    let output: String
}

func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Runs one call with stdout redirected to an unlinked temporary file.
func call<T: Encodable>(_ body: () -> T) -> Item {
    var template = Array("/tmp/kiln-call-XXXXXX".utf8CString)
    let sink = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
    fflush(stdout)
    let saved = dup(STDOUT_FILENO)
    dup2(sink, STDOUT_FILENO)
    let start = monotonicNanoseconds()
    let value = body()
    let elapsed = monotonicNanoseconds() - start
    fflush(stdout)
    dup2(saved, STDOUT_FILENO)
    close(saved)

    var printed = [UInt8]()
    var chunk = [UInt8](repeating: 0, count: 65536)
    lseek(sink, 0, SEEK_SET)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(sink, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        printed.append(contentsOf: chunk[0..<count])
    }
    close(sink)
    return Item(
        type: "result",
        value: AnyResult(value),
        time: String(format: "%.7f", Double(elapsed) / 1e9),
        output: String(decoding: printed, as: UTF8.self)
    )
}

@main
struct Checker {
    static func main() {
        let items = cases.map { pair in call { solution(pair.0, pair.1) } }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        do {
            let data = try encoder.encode(items)
            print(String(decoding: data, as: UTF8.self))
        } catch {
            fputs("checker: cannot encode the results: \(error)\n", stderr)
            exit(1)
        }
    }
}
