#!/bin/sh
# The guest's half of scripts/stock-vm-test.sh, run as root on the stock Debian 12 VM in the
# shared checkout (/host). kiln lives in /opt/kiln, as systemd/README.md installs it.
#
#   provision   install kiln as a new user would (once, into the kept image)
#   suites      this checkout's files over /opt/kiln, then: `make run` and `make run-rootless`
#               answer, the systemd units serve and stop, and the test suites run (root, then
#               rootless) for KILN_VM_LANGS
#   bench       the no-op and python a+b, kiln against the bare command, in this guest
set -eu
src=$(pwd)
dest=/opt/kiln
langs=${KILN_VM_LANGS:-python js cpp}
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

step() { echo "== stock-vm: $* ($(cut -d' ' -f1 /proc/uptime) s)"; }

# the checkout's files as a clone has them (tracked and new, never ignored: no .venv, no builds)
copy_checkout() {
    mkdir -p "$dest"
    git -c safe.directory='*' -C "$src" ls-files -z --cached --others --exclude-standard |
        (cd "$src" && tar --null --files-from=- --create --file=-) | tar --extract --file=- --directory="$dest"
}

install_kiln() {
    cd "$dest"
    scripts/setup.sh
    langs/install-toolchains.sh $langs
    scripts/rootless.sh prepare
}

# `make TARGET` in the background until GET /health says ok and a python run answers; then
# SIGINT (Ctrl-C, as a user stops it) and nothing of kiln may be left: no process, no cgroup
answers_and_stops() {
    target=$1
    log=/tmp/kiln-$target.log
    setsid make -C "$dest" "$target" >"$log" 2>&1 &
    pid=$!
    i=0
    until curl -fsS localhost:4040/health >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 600 ] || ! kill -0 $pid 2>/dev/null; then
            echo "make $target did not serve:"; cat "$log"; return 1
        fi
        sleep 1
    done
    answer=$(curl -fsS localhost:4040/run -d '{"lang_slug":"python","solution_text":"print(6*7)"}')
    echo "make $target: $answer"
    echo "$answer" | grep -q '"stdout":"42\\n"' || { cat "$log"; return 1; }
    kill -INT -- -$pid
    wait $pid || true
    sleep 1
    left=$(pgrep -f 'kiln(-init)? |bin/kiln serve' || true)
    [ -z "$left" ] || { echo "make $target left processes: $left"; ps -o pid,user,args -p "$left"; return 1; }
    cgroups=$(find /sys/fs/cgroup -type d \( -name 'slot-*' -o -name supervisor -o -name 'kiln*' \) 2>/dev/null || true)
    [ -z "$cgroups" ] || { echo "make $target left cgroups: $cgroups"; return 1; }
}

case "${1:-suites}" in
provision)
    step "installing kiln into $dest"
    copy_checkout
    install_kiln
    step "provisioned"
    ;;
suites)
    step "this checkout over $dest"
    copy_checkout
    install_kiln
    step "make run"
    answers_and_stops run
    step "make run-rootless"
    answers_and_stops run-rootless
    step "the suites, as root"
    cd "$dest"
    # the languages not provisioned here are skipped by their tests, saying why
    .venv/bin/python -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} tests/api tests/security tests/langs
    ;;
bench)
    cd "$dest"
    .venv/bin/python bench/latency.py --only no-op
    ;;
*) echo "usage: $0 provision|suites|bench" >&2 && exit 2 ;;
esac
