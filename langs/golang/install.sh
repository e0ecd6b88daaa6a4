#!/bin/sh
# Installs Go (Debian's golang-go) and warms the workspace's build cache: the whole standard
# library compiled into .cache/go-build with the very environment kiln gives the task (the
# golang entry of kiln/langs.py: keep go_env below in sync with it), with this folder mounted at
# /sandbox in a private mount namespace, so a request compiles and links only its two files.
# Idempotent, and silent when the cache is already warm for this toolchain (a stamp holds a
# fingerprint of the Makefile, this script and the Go version).
set -eu
cd "$(dirname "$0")"
export PATH=/usr/local/bin:/usr/bin:/bin LC_ALL=C
workspace=$(pwd -P)
stamp=.kiln-installed
cache=.cache/go-build

# The task's environment, as kiln sets it (HOME=/sandbox, the golang entry's env).
go_env() {
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/sandbox LC_ALL=C \
        GOCACHE=/sandbox/.cache/go-build CGO_ENABLED=0 GOMAXPROCS=2 GOPROXY=off GOSUMDB=off \
        GOTOOLCHAIN=local GOTELEMETRY=off GOFLAGS= "$@"
}

fingerprint() {
    { cat Makefile install.sh; go version 2>/dev/null || true; readlink -f "$(command -v go)" 2>/dev/null || true; } \
        | sha256sum | cut -d' ' -f1
}

if command -v go >/dev/null 2>&1 && [ -f "$cache/README" ] \
    && [ "$(cat "$stamp" 2>/dev/null || true)" = "$(fingerprint)" ]; then
    exit 0
fi

if ! command -v go >/dev/null 2>&1; then
    echo "langs/golang/install.sh: installing golang-go (apt)"
    log=$(mktemp)
    if ! apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends golang-go >"$log" 2>&1; then
        echo "langs/golang/install.sh: golang not installed: apt-get install golang-go failed: $(tail -n 1 "$log")"
        rm -f "$log"
        exit 0
    fi
    rm -f "$log"
fi

echo "langs/golang/install.sh: building the Go standard library into langs/golang/$cache"
rm -rf .cache "$stamp"
mkdir -p "$cache"
[ -d /sandbox ] || mkdir /sandbox
# The cache is keyed on absolute paths: build it where the task sees it, at /sandbox. The same
# build command as the Makefile's (a throw-away program in /tmp) checks the toolchain end to end.
go_env unshare --mount --propagation private sh -euc '
    mount --bind "$1" /sandbox
    cd /sandbox
    go build std
    warm=$(mktemp -d)
    printf "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n)\n\nfunc main() {\n\tout, _ := json.Marshal([]int{1})\n\tfmt.Println(string(out))\n}\n" > "$warm/checker.go"
    printf "package main\n\nfunc solution(a, b int) int { return a + b }\n" > "$warm/solution.go"
    go build -ldflags="-s -w" -o "$warm/checker" "$warm/checker.go" "$warm/solution.go"
    [ "$("$warm/checker")" = "[1]" ]
    rm -rf "$warm"
' sh "$workspace"
# Every uid may write the cache (overlayfs copies a file up when the task writes it). go touches
# an entry's mtime when it is older than an hour, and trims entries older than five days: dates in
# the far future keep both from ever copying the warm entries up.
find .cache -type f -exec touch -m -d '2100-01-01 00:00:00' {} +
chmod -R a+rwX .cache
fingerprint > "$stamp"
