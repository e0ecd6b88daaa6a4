"""zig through the real HTTP API and the real sandbox: zig build-exe compiles the client's
checker.zig, which imports solution.zig (langs/zig, prewarmed cache), and the checker prints the
harness protocol."""

from __future__ import annotations

import pytest

import langcase
from kilntest import REPO

ARGUMENTS = [[1, 2], [3, 4], [-5, 5], [100, 23]]
SOLUTION = langcase.example("zig", "solution.zig")
ZIG = langcase.Lang("zig", checker=langcase.example("zig", "checker.zig"), asserts={"arguments": ARGUMENTS}, ready_timeout=120, one_line=False)
WORKSPACE = REPO / "langs" / "zig"


@pytest.fixture(scope="module")
def server():
    yield from ZIG.serve(langcase.missing(
        "run langs/install-toolchains.sh zig",
        programs=("zig",),
        paths=(
            (WORKSPACE / ".cache" / "zig", "the zig cache is not prewarmed"),
            (WORKSPACE / ".installed", "the workspace is not marked prepared"),
        ),
    ))


def test_a_plus_b_with_the_example_checker(server):
    body = ZIG.run(server, SOLUTION)
    assert body["stderr"] == ""
    langcase.assert_a_plus_b(ZIG, body, ARGUMENTS)


def test_output_is_captured_per_call(server):
    solution = (
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) i64 {\n"
        "    const out = std.fs.File.stdout();\n"
        "    if (a == 3) out.deprecatedWriter().print(\"three {d}\", .{b}) catch {};\n"
        "    if (a < 0) out.writeAll(\"negative\") catch {};\n"
        "    return a * b;\n"
        "}\n"
    )
    got = ZIG.items(ZIG.run(server, solution))
    assert [(i["value"], i["output"]) for i in got] == [(2, ""), (12, "three 4"), (-25, "negative"), (2300, "")]


def test_an_error_in_one_call_leaves_the_others(server):
    solution = (
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) !i64 {\n"
        "    try std.fs.File.stdout().writeAll(\"before\");\n"
        "    if (a == 3) return error.ThreeIsNotAllowed;\n"
        "    return a - b;\n"
        "}\n"
    )
    langcase.assert_only_the_failing_call_fails(ZIG, ZIG.run(server, solution), "ThreeIsNotAllowed")


def test_a_checker_in_codebattles_shape_compiles_unchanged(server):
    # The shape Codebattle generates for Zig 0.15: a pipe around each call, std.json.fmt through
    # the new std.Io.Writer interface, the solution's own `const std` and typed constants.
    checker = (
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
    got = ZIG.items(ZIG.run(server, solution, checker=checker))
    assert [(i["type"], i["value"], i["output"]) for i in got] == [("result", 3, "hi")]
    assert isinstance(got[0]["time"], float)


def test_two_runs_at_once_each_with_its_own_copy(server):
    langcase.assert_each_run_has_its_own_copy(ZIG, server, SOLUTION)


def test_a_compile_error_is_the_compilers_message_and_status(server):
    body = ZIG.run(server, "pub fn solution(a: i64, b: i64) i64 {\n    return a +;\n}\n")
    langcase.assert_compile_error(body, "solution.zig:2", "error")


def test_an_infinite_loop_times_out(server):
    solution = (
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) i64 {\n"
        "    std.debug.print(\"looping\\n\", .{});\n"
        "    var n: i64 = a;\n"
        "    while (true) {\n        n +%= b;\n        std.mem.doNotOptimizeAway(n);\n    }\n"
        "}\n"
    )
    body = ZIG.run(server, solution, timeout="15s")  # compiling takes part of it; the loop the rest
    langcase.assert_timed_out(body, "looping")
