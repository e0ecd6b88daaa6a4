#!/bin/sh
# Installs Zig from PyPI (the `ziglang` wheel, pinned below) with the SYSTEM python into
# /usr/local/lib/kiln-zig, links /usr/local/bin/zig to it (under /usr, so the sandbox sees it),
# and prewarms the workspace's zig cache (.cache/zig) with a representative build, with this
# folder mounted at /sandbox in a private mount namespace, so a request does not pay for
# compiler_rt and the like. Idempotent, and silent when everything is in place (a stamp holds a
# fingerprint of the Makefile, this script and the zig version).
set -eu
cd "$(dirname "$0")"
export PATH=/usr/local/bin:/usr/bin:/bin LC_ALL=C
workspace=$(pwd -P)
stamp=.kiln-installed
version=0.15.2
prefix=/usr/local/lib/kiln-zig
zig=/usr/local/bin/zig

fingerprint() {
    { cat Makefile install.sh; "$zig" version 2>/dev/null || true; } | sha256sum | cut -d' ' -f1
}

if [ "$("$zig" version 2>/dev/null || true)" = "$version" ] && [ -d .cache/zig ] \
    && [ "$(cat "$stamp" 2>/dev/null || true)" = "$(fingerprint)" ]; then
    exit 0
fi

if [ "$("$zig" version 2>/dev/null || true)" != "$version" ]; then
    if ! /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
        echo "langs/zig/install.sh: installing python3-pip (apt)"
        if ! apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends python3-pip >/dev/null 2>&1; then
            echo "langs/zig/install.sh: zig not installed: apt-get install python3-pip failed"
            exit 0
        fi
    fi
    echo "langs/zig/install.sh: installing ziglang==$version (PyPI) into $prefix"
    log=$(mktemp)
    # --target: a folder of its own, outside Debian's dist-packages (no "externally managed" guard)
    if ! /usr/bin/python3 -m pip install --quiet --disable-pip-version-check --no-compile --upgrade \
        --target "$prefix" "ziglang==$version" >"$log" 2>&1; then
        echo "langs/zig/install.sh: zig not installed: pip install ziglang==$version failed: $(grep -v '^WARNING' "$log" | tail -n 1)"
        rm -f "$log"
        exit 0
    fi
    rm -f "$log"
    chmod -R a+rX "$prefix"
    # zig finds its lib/ next to its real path, so a link is enough
    ln -sfn "$prefix/ziglang/zig" "$zig"
    if [ "$("$zig" version 2>/dev/null || true)" != "$version" ]; then
        echo "langs/zig/install.sh: zig not installed: $zig does not run as zig $version"
        exit 0
    fi
fi

echo "langs/zig/install.sh: prewarming the zig cache in langs/zig/.cache/zig"
rm -rf .cache "$stamp"
mkdir -p .cache/zig
[ -d /sandbox ] || mkdir /sandbox
# The test command itself, on a checker in the shape Codebattle generates (std.json, stdout
# through a pipe), with this folder at /sandbox.
env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/sandbox LC_ALL=C unshare --mount --propagation private sh -euc '
    mount --bind "$1" /sandbox
    cd /sandbox
    mkdir -p check
    cat > check/solution.zig <<EOF
const std = @import("std");

pub fn solution(a: i64, b: i64) i64 {
    std.debug.print("", .{});
    return a + b;
}
EOF
    cat > check/checker.zig <<EOF
const std = @import("std");
const solution = @import("solution.zig");

pub fn main() !void {
    const fds = try std.posix.pipe();
    std.posix.close(fds[0]);
    std.posix.close(fds[1]);
    var buffer: [256]u8 = undefined;
    var writer = std.fs.File.stdout().writer(&buffer);
    const out = &writer.interface;
    const t0 = std.time.nanoTimestamp();
    const value = solution.solution(1, 2);
    const seconds = @as(f64, @floatFromInt(std.time.nanoTimestamp() - t0)) / std.time.ns_per_s;
    try out.print("[{f},{f}]", .{ std.json.fmt(value, .{}), std.json.fmt(seconds >= 0, .{}) });
    try out.flush();
}
EOF
    [ "$(make -s test)" = "[3,true]" ]
    rm -f check/solution.zig check/checker.zig checker checker.o
    rmdir check 2>/dev/null || true
' sh "$workspace"
# Every uid may write the cache (overlayfs copies a file up when the task writes it).
chmod -R a+rwX .cache
fingerprint > "$stamp"
