#!/bin/sh
# Installs what kiln's ts workspace needs: node (/usr/bin/node; Debian's nodejs if absent) and,
# into langs/ts/node_modules exactly as package-lock.json pins them, esbuild (which compiles the
# TypeScript solution; its native binary comes in the @esbuild/<platform> package) and lodash and
# rambda (which solutions may require, as for js). Idempotent, and silent when node_modules already
# matches the lock (a stamp holds the lock's sha256). Where node cannot be installed it says why
# in one line and exits 0: the language is then not served.
set -eu
cd "$(dirname "$0")"

# The js workspace's harness runs the compiled solution: a copy of it, not a second source
# (only this workspace is visible in a ts sandbox)
cmp -s ../js/check/harness.js check/js-harness.js 2>/dev/null || cp ../js/check/harness.js check/js-harness.js

say() { echo "langs/ts/install.sh: $*"; }
stamp=node_modules/.kiln-lock
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -x /usr/bin/node ] && [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ] \
    && [ -x node_modules/esbuild/bin/esbuild ] && [ -f node_modules/lodash/package.json ] \
    && [ -f node_modules/rambda/package.json ]; then
    exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [ ! -x /usr/bin/node ] || ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        say "node/npm are not installed and this is not root on Debian (apt-get): ts is not served"
        exit 0
    fi
    say "installing nodejs and npm (apt)"
    apt_install() {
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "$@" >"$log" 2>&1
    }
    if ! apt_install nodejs npm; then
        apt-get -o DPkg::Lock::Timeout=900 update -q >>"$log" 2>&1 || true
        if ! apt_install nodejs npm; then
            tail -n 20 "$log" >&2
            say "apt-get could not install nodejs npm: ts is not served"
            exit 0
        fi
    fi
fi

say "installing esbuild, lodash and rambda into langs/ts/node_modules"
# `npm ci`: `npm install` held to the lock (it never rewrites package-lock.json); it runs
# esbuild's install script, which checks (and links) the native binary.
if ! npm ci --omit=dev --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
    cat "$log" >&2
    exit 1
fi
if ! node_modules/esbuild/bin/esbuild --version >"$log" 2>&1; then
    cat "$log" >&2
    say "esbuild does not run on this host"
    exit 1
fi
chmod -R a+rX node_modules
echo "$want" > "$stamp"
