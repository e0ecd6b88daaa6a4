#!/bin/sh
# Installs Ruby for kiln's ruby workspace: Debian's `ruby` (Ruby 3.1 on Debian 12) under /usr,
# which the sandbox sees. The workspace itself needs no preparation (check/ holds plain .rb files).
# Idempotent, and silent when Ruby is already there. Where it cannot be installed it says why in
# one line and exits 0: the language is then not served.
set -eu
cd "$(dirname "$0")"

[ -x /usr/bin/ruby ] && exit 0

say() { echo "langs/ruby/install.sh: $*"; }
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "ruby is not installed and this is not root on Debian (apt-get): ruby is not served"
    exit 0
fi
say "installing ruby (apt)"
log=$(mktemp)
apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "$@" >"$log" 2>&1
}
if ! apt_install ruby; then
    apt-get -o DPkg::Lock::Timeout=900 update -q >>"$log" 2>&1 || true
    if ! apt_install ruby; then
        tail -n 20 "$log" >&2
        rm -f "$log"
        say "apt-get could not install ruby: ruby is not served"
        exit 0
    fi
fi
rm -f "$log"
