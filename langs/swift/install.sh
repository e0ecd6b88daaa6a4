#!/bin/sh
# Installs the Swift toolchain where this host can have it and fills the workspace's Clang module
# cache (.module-cache/) at /sandbox, so a request does not rebuild Glibc's and Foundation's C
# modules. Debian's `swiftlang` package exists from Debian 13 (glibc >= 2.38) on; on Debian 12
# (glibc 2.36) there is none, so without a Swift toolchain already installed (README.md) this
# prints one line and exits 0, and kiln does not serve swift. Idempotent, and silent when done.
set -eu
cd "$(dirname "$0")"
export PATH=/usr/local/bin:/usr/bin:/bin LC_ALL=C  # kiln's sandbox PATH
workspace=$(pwd -P)
stamp=.kiln-installed

if ! command -v swiftc >/dev/null 2>&1; then
    glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')
    if ! dpkg --compare-versions "${glibc:-0}" ge 2.38; then
        echo "langs/swift/install.sh: skipped: Swift needs glibc >= 2.38 (Debian 13's swiftlang package); this host has glibc ${glibc:-unknown} (see langs/swift/README.md)"
        exit 0
    fi
    echo "langs/swift/install.sh: installing swiftlang"
    export DEBIAN_FRONTEND=noninteractive
    apt="apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends swiftlang"
    if ! { $apt >/dev/null 2>&1 || { apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null && $apt >/dev/null; }; }; then
        echo "langs/swift/install.sh: skipped: no swiftlang package for this host (glibc $glibc; see langs/swift/README.md)"
        exit 0
    fi
fi
swiftc=$(readlink -f "$(command -v swiftc)")
case "$swiftc" in
    /usr/*) ;;
    *) echo "langs/swift/install.sh: skipped: swiftc resolves to $swiftc, outside /usr: add its toolchain folder to swift's readonly_paths in kiln/langs.py" >&2
       exit 0 ;;
esac

fingerprint() {
    { cat Makefile install.sh; swiftc --version 2>&1; echo "$swiftc"; } | sha256sum | cut -d' ' -f1
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(fingerprint)" ]; then
    exit 0
fi

echo "langs/swift/install.sh: filling .module-cache at /sandbox ($(swiftc --version 2>&1 | head -n 1))"
rm -rf .module-cache "$stamp"
mkdir .module-cache
[ -d /sandbox ] || mkdir /sandbox
# The module cache records absolute paths: build it where the task sees it, at /sandbox, with
# the Makefile's own command on a throw-away checker (it imports what checkers import: Foundation
# and Glibc), in a private mount namespace with a private /tmp.
trap 'rm -f check/solution.swift check/checker.swift' EXIT
printf '%s\n' 'func solution(_ a: Int, _ b: Int) -> Int { a + b }' > check/solution.swift
cat > check/checker.swift <<'SWIFT'
import Foundation
#if canImport(Glibc)
import Glibc
#endif

@main
struct Checker {
    static func main() {
        let data = try! JSONEncoder().encode([solution(1, 2)])
        fflush(stdout)
        print(String(decoding: data, as: UTF8.self))
    }
}
SWIFT
env -i PATH="$PATH" HOME=/sandbox LANG=C.UTF-8 unshare --mount --propagation private sh -euc '
    mount --bind "$1" /sandbox
    mount -t tmpfs -o size=256m,mode=1777 tmpfs /tmp
    cd /sandbox
    out=$(sh -e -c "$(make -n -s test)")
    [ "$out" = "[3]" ] || { echo "langs/swift/install.sh: the warm-up checker printed: $out" >&2; exit 1; }
' sh "$workspace"
# Any task uid may write the cache (a module rebuilt after a toolchain change, clang's
# timestamps): overlayfs copies a file up when the task writes it.
chmod -R a+rwX .module-cache
fingerprint > "$stamp"
