//! An example checker for kiln's zig workspace (Zig 0.15): check/checker.zig imports
//! check/solution.zig. For each argument list of check/asserts.json ({"arguments": [[a, b], ...]})
//! it calls solution(a, b) and prints the protocol: one JSON array with one item per call,
//! {"type":"result","value":...,"time":"0.0000123","output":"<what the call printed>"}, or an
//! "error" item when the solution returns an error (the next calls still run).
const std = @import("std");
const solution = @import("solution.zig");

const Asserts = struct { arguments: []const [2]i64 = &.{} };

/// Runs solution(a, b) with fd 1 redirected to a memory file and writes its item to `out`.
fn call(allocator: std.mem.Allocator, out: *std.Io.Writer, a: i64, b: i64) !void {
    const memory = try std.posix.memfd_create("output", 0);
    defer std.posix.close(memory);
    const saved = try std.posix.dup(std.posix.STDOUT_FILENO);
    defer std.posix.close(saved);
    try std.posix.dup2(memory, std.posix.STDOUT_FILENO);

    var timer = try std.time.Timer.start();
    const returned = solution.solution(a, b);
    const seconds = @as(f64, @floatFromInt(timer.read())) / std.time.ns_per_s;

    try std.posix.dup2(saved, std.posix.STDOUT_FILENO);
    const file = std.fs.File{ .handle = memory };
    try file.seekTo(0);
    const output = try file.readToEndAlloc(allocator, 16 << 20);
    defer allocator.free(output);

    const value = switch (@typeInfo(@TypeOf(returned))) {
        .error_union => returned catch |err| {
            try out.print("{{\"type\":\"error\",\"value\":{f},\"time\":\"{d:.7}\",\"output\":{f}}}", .{ std.json.fmt(@errorName(err), .{}), seconds, std.json.fmt(output, .{}) });
            return;
        },
        else => returned,
    };
    try out.print("{{\"type\":\"result\",\"value\":{f},\"time\":\"{d:.7}\",\"output\":{f}}}", .{ std.json.fmt(value, .{}), seconds, std.json.fmt(output, .{}) });
}

pub fn main() !void {
    var arena = std.heap.ArenaAllocator.init(std.heap.page_allocator);
    defer arena.deinit();
    const allocator = arena.allocator();

    const text = std.fs.cwd().readFileAlloc(allocator, "check/asserts.json", 1 << 20) catch "{}";
    const asserts = try std.json.parseFromSliceLeaky(Asserts, allocator, text, .{ .ignore_unknown_fields = true });

    var buffer: [4096]u8 = undefined;
    var stdout = std.fs.File.stdout().writer(&buffer);
    const out = &stdout.interface;
    try out.writeByte('[');
    for (asserts.arguments, 0..) |args, i| {
        if (i > 0) try out.writeByte(',');
        try out.flush(); // nothing of the report may sit in the buffer while fd 1 is redirected
        try call(allocator, out, args[0], args[1]);
    }
    try out.writeAll("]\n");
    try out.flush();
}
