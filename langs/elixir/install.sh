#!/bin/sh
# Installs Elixir for kiln's elixir workspace: Debian's `elixir` (Elixir 1.14 on Erlang/OTP 25 on
# Debian 12) under /usr, then compiles the harness (check/harness.ex) into ebin/, so that a run
# loads its .beam instead of compiling it. Idempotent, and silent when all is done (a stamp holds
# the sha256 of harness.ex and of Elixir's version). Where Elixir cannot be installed it says why
# in one line and exits 0: the language is then not served.
set -eu
cd "$(dirname "$0")"

say() { echo "langs/elixir/install.sh: $*"; }
stamp=ebin/.kiln-stamp
want() { cat check/harness.ex /usr/lib/elixir/lib/elixir/ebin/elixir.app 2>/dev/null | sha256sum | cut -d' ' -f1; }

if [ -x /usr/bin/elixir ] && [ -f ebin/Elixir.KilnHarness.beam ] && [ "$(cat "$stamp" 2>/dev/null || true)" = "$(want)" ]; then
    exit 0
fi

if [ ! -x /usr/bin/elixir ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        say "elixir is not installed and this is not root on Debian (apt-get): elixir is not served"
        exit 0
    fi
    say "installing elixir (apt)"
    log=$(mktemp)
    apt_install() {
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "$@" >"$log" 2>&1
    }
    if ! apt_install elixir; then
        apt-get -o DPkg::Lock::Timeout=900 update -q >>"$log" 2>&1 || true
        if ! apt_install elixir; then
            tail -n 20 "$log" >&2
            rm -f "$log"
            say "apt-get could not install elixir: elixir is not served"
            exit 0
        fi
    fi
    rm -f "$log"
fi

say "compiling check/harness.ex into ebin/"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! (cd check && ERL_CRASH_DUMP_SECONDS=0 /usr/bin/elixirc --erl "+S 1:1" -o "$tmp" harness.ex) >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    exit 1
fi
rm -f "$tmp/log"
rm -rf ebin
mkdir ebin
cp "$tmp"/*.beam ebin/
chmod -R a+rX ebin
want > "$stamp"
