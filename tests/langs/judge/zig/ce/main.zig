const std = @import("std");

pub fn main() !void {
    var buffer: [4096]u8 = undefined;
    const len = try std.fs.File.stdin().readAll(&buffer);
    var tokens = std.mem.tokenizeAny(u8, buffer[0..len], " \t\r\n");
    const a = try std.fmt.parseInt(i64, tokens.next().?, 10);
    const b: []const u8 = try std.fmt.parseInt(i64, tokens.next().?, 10);

    var out: [64]u8 = undefined;
    var stdout = std.fs.File.stdout().writer(&out);
    try stdout.interface.print("{d}\n", .{a + b});
    try stdout.interface.flush();
}
