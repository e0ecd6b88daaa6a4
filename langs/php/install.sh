#!/bin/sh
# Installs PHP for kiln's php workspace: Debian's php-cli (PHP 8.2 on Debian 12) and php-mbstring
# (solutions use mb_* functions, as Codebattle's PHP image has them) under /usr; their ini files
# live in /etc/php, which kiln binds read-only into the sandbox (kiln/langs.py). The workspace
# itself needs no preparation. Idempotent, and silent when PHP is already there. Where it cannot
# be installed it says why in one line and exits 0: the language is then not served.
set -eu
cd "$(dirname "$0")"

have_all() {
    [ -x /usr/bin/php ] || return 1
    for so in /usr/lib/php/*/mbstring.so; do
        [ -f "$so" ] && return 0
    done
    return 1
}
have_all && exit 0

say() { echo "langs/php/install.sh: $*"; }
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "php-cli/php-mbstring are not installed and this is not root on Debian (apt-get): php is not served"
    exit 0
fi
say "installing php-cli and php-mbstring (apt)"
log=$(mktemp)
apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "$@" >"$log" 2>&1
}
if ! apt_install php-cli php-mbstring; then
    apt-get -o DPkg::Lock::Timeout=900 update -q >>"$log" 2>&1 || true
    if ! apt_install php-cli php-mbstring; then
        tail -n 20 "$log" >&2
        rm -f "$log"
        say "apt-get could not install php-cli php-mbstring: php is not served"
        exit 0
    fi
fi
rm -f "$log"
