"""zig through the real HTTP API and the real sandbox: zig build-exe compiles the client's
checker.zig, which imports solution.zig (langs/zig, prewarmed cache), and the client harness prints the
harness protocol.

Here: its own tests. The tests every language has (a+b, a loop, an error in one call...) are
its rows in test_every_language.py."""

from __future__ import annotations

import langcase

pytestmark = langcase.only("zig")
ZIG = langcase.LANGS["zig"]


def test_a_client_harness_in_codebattles_shape_compiles_unchanged(lang_server):
    # The shape Codebattle generates for Zig 0.15: a pipe around each call, std.json.fmt through
    # the new std.Io.Writer interface, the solution's own `const std` and typed constants.
    client_harness = (
        "const std = @import(\"std\");\nconst solution = @import(\"solution.zig\");\n\n"
        "fn writeJson(outw: anytype, value: anytype) !void {\n"
        "    try outw.print(\"{f}\", .{std.json.fmt(value, .{})});\n}\n\n"
        "pub fn main() !void {\n"
        "    const gpa = std.heap.page_allocator;\n"
        "    const stdout_file = std.fs.File.stdout();\n"
        "    const stdout_fd = stdout_file.handle;\n"
        "    var stdout_buf: [4096]u8 = undefined;\n"
        "    var stdout_writer = stdout_file.writer(&stdout_buf);\n"
        "    const outw = &stdout_writer.interface;\n"
        "    try outw.writeByte('[');\n"
        "    {\n"
        "        const a1: i64 = 1;\n        const b1: i64 = 2;\n"
        "        const fds = try std.posix.pipe();\n"
        "        const saved = try std.posix.dup(stdout_fd);\n"
        "        defer std.posix.close(saved);\n"
        "        try std.posix.dup2(fds[1], stdout_fd);\n"
        "        const t0 = std.time.nanoTimestamp();\n"
        "        const val = solution.solution(a1, b1);\n"
        "        const t1 = std.time.nanoTimestamp();\n"
        "        try std.posix.dup2(saved, stdout_fd);\n"
        "        std.posix.close(fds[1]);\n"
        "        var rfile = std.fs.File{ .handle = fds[0] };\n"
        "        defer rfile.close();\n"
        "        const out_slice = try rfile.readToEndAlloc(gpa, 1 << 20);\n"
        "        defer gpa.free(out_slice);\n"
        "        const secs = @as(f64, @floatFromInt(t1 - t0)) / @as(f64, @floatFromInt(std.time.ns_per_s));\n"
        "        try outw.writeAll(\"{\\\"type\\\":\\\"result\\\",\\\"value\\\":\");\n"
        "        try writeJson(outw, val);\n"
        "        try outw.writeAll(\",\\\"time\\\":\");\n"
        "        try writeJson(outw, secs);\n"
        "        try outw.writeAll(\",\\\"output\\\":\");\n"
        "        try writeJson(outw, @as([]const u8, out_slice));\n"
        "        try outw.writeByte('}');\n"
        "    }\n"
        "    try outw.writeByte(']');\n"
        "    try outw.flush();\n"
        "}\n"
    )
    solution = (
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) i64 {\n"
        "    const ans: i64 = a + b;\n"
        "    std.fs.File.stdout().writeAll(\"hi\") catch {};\n"
        "    return ans;\n"
        "}\n"
    )
    got = ZIG.items(ZIG.run(lang_server, solution, client_harness=client_harness))
    assert [(i["type"], i["value"], i["output"]) for i in got] == [("result", 3, "hi")]
    assert isinstance(got[0]["time"], float)
