"""zig through the real HTTP API and the real sandbox: zig build-exe compiles the client's
checker.zig, which imports solution.zig (langs/zig, prewarmed cache), and the checker prints the
harness protocol."""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kilntest import REPO, Server

EXAMPLES = Path(__file__).parent / "examples" / "zig"
CHECKER = (EXAMPLES / "checker.zig").read_text()
SOLUTION = (EXAMPLES / "solution.zig").read_text()
ARGUMENTS = [[1, 2], [3, 4], [-5, 5], [100, 23]]
TIMEOUT = "30s"  # compiling: generous, these tests assert behaviour, not speed
SECONDS = re.compile(r"^\d+\.\d{7}$")


def _missing() -> str | None:
    if shutil.which("zig", path="/usr/local/bin:/usr/bin:/bin") is None:
        return "zig is not installed: run langs/install-toolchains.sh zig"
    if not (REPO / "langs" / "zig" / ".cache" / "zig").is_dir():
        return "the zig cache is not prewarmed: run langs/install-toolchains.sh zig"
    if not (REPO / "langs" / "zig" / ".installed").is_file():
        return "the workspace is not marked prepared: run langs/install-toolchains.sh zig"
    return None


@pytest.fixture(scope="module")
def zig():
    reason = _missing()
    if reason:
        pytest.skip(f"zig: {reason}")
    server = Server({"RUN_LANGS": "zig", "RUN_CONCURRENCY": "2"}).wait_ready(120)
    yield server
    server.stop()


def run(server, solution: str, checker: str = CHECKER, arguments=ARGUMENTS, timeout: str = TIMEOUT) -> dict:
    response = server.run(lang_slug="zig", solution_text=solution, checker_text=checker, asserts={"arguments": arguments}, timeout=timeout)
    assert response.status_code == 200, response.text
    return response.json()


def items(body: dict) -> list[dict]:
    assert body["exit_code"] == 0, body
    assert body["stats"]["outcome"] == "exited", body
    return json.loads(body["stdout"])


def test_a_plus_b_with_the_example_checker(zig):
    body = run(zig, SOLUTION)
    assert body["stderr"] == ""
    got = items(body)
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", 3, "adding 1 and 2\n"),
        ("result", 7, "adding 3 and 4\n"),
        ("result", 0, "adding -5 and 5\n"),
        ("result", 123, "adding 100 and 23\n"),
    ]
    assert all(SECONDS.match(i["time"]) for i in got)


def test_output_is_captured_per_call(zig):
    solution = (
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) i64 {\n"
        "    const out = std.fs.File.stdout();\n"
        "    if (a == 3) out.deprecatedWriter().print(\"three {d}\", .{b}) catch {};\n"
        "    if (a < 0) out.writeAll(\"negative\") catch {};\n"
        "    return a * b;\n"
        "}\n"
    )
    got = items(run(zig, solution))
    assert [(i["value"], i["output"]) for i in got] == [(2, ""), (12, "three 4"), (-25, "negative"), (2300, "")]


def test_an_error_in_one_call_leaves_the_others(zig):
    solution = (
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) !i64 {\n"
        "    try std.fs.File.stdout().writeAll(\"before\");\n"
        "    if (a == 3) return error.ThreeIsNotAllowed;\n"
        "    return a - b;\n"
        "}\n"
    )
    got = items(run(zig, solution))
    assert [(i["type"], i["value"], i["output"]) for i in got] == [
        ("result", -1, "before"),
        ("error", "ThreeIsNotAllowed", "before"),
        ("result", -10, "before"),
        ("result", 77, "before"),
    ]


def test_a_checker_in_codebattles_shape_compiles_unchanged(zig):
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
    got = items(run(zig, solution, checker))
    assert [(i["type"], i["value"], i["output"]) for i in got] == [("result", 3, "hi")]
    assert isinstance(got[0]["time"], float)


def test_two_runs_at_once_each_with_its_own_copy(zig):
    # two slots, two uids, one read-only workspace with its prebuilt caches underneath both
    with ThreadPoolExecutor(2) as pool:
        bodies = list(pool.map(lambda args: run(zig, SOLUTION, arguments=args), [[[1, 2]], [[20, 22]]]))
    assert [[i["value"] for i in items(body)] for body in bodies] == [[3], [42]]


def test_a_compile_error_is_the_compilers_message_and_status(zig):
    body = run(zig, "pub fn solution(a: i64, b: i64) i64 {\n    return a +;\n}\n")
    assert body["stats"]["outcome"] == "exited"
    assert body["exit_code"] not in (0, None)
    assert body["stdout"] == ""
    assert "solution.zig:2" in body["stderr"] and "error" in body["stderr"]


def test_an_infinite_loop_times_out(zig):
    solution = (
        "const std = @import(\"std\");\n\n"
        "pub fn solution(a: i64, b: i64) i64 {\n"
        "    std.debug.print(\"looping\\n\", .{});\n"
        "    var n: i64 = a;\n"
        "    while (true) {\n        n +%= b;\n        std.mem.doNotOptimizeAway(n);\n    }\n"
        "}\n"
    )
    body = run(zig, solution, timeout="15s")  # compiling takes part of it; the loop the rest
    assert body["stats"]["outcome"] == "timed_out"
    assert body["exit_code"] is None
    assert "looping" in body["stderr"]
