#!/bin/sh
# kiln on a stock Debian 12 host (Debian's 6.1 kernel, systemd as PID 1, cgroup v2 only), booted
# under qemu by ../shared/tools/stock-vm.sh: `make test` runs `scripts/stock-vm-test.sh test`.
#
#   scripts/stock-vm-test.sh test       the guest's suites (scripts/stock-vm-guest.sh suites)
#   scripts/stock-vm-test.sh bench      `make bench`'s no-op and python a+b, in the guest
#   scripts/stock-vm-test.sh shell      a root shell in the guest, kiln in /opt/kiln
#   scripts/stock-vm-test.sh run CMD..  one command in /opt/kiln, in a delegated scope, as root
#   scripts/stock-vm-test.sh provision  the image alone (the others make it when it is missing)
#
# Another kernel: KILN_VM_PACKAGES adds Debian packages to the image, and the guest boots the
# newest kernel in its /boot; give it a folder of its own so the usual image stays, e.g. Debian
# 12's Linux 6.12 (bookworm-security carries it):
#   STOCK_VM_DIR=/var/tmp/kiln-stock-vm-612 KILN_VM_PACKAGES=linux-image-6.12-amd64 scripts/stock-vm-test.sh run ...
#
# The image is Debian's packages (the tool's own, and kiln's: GUEST_PACKAGES) with this
# checkout installed in /opt/kiln as a new user would (`make setup`, the languages' install.sh,
# scripts/rootless.sh prepare), made once and kept in $STOCK_VM_DIR; it is made again when
# anything that goes into it changes (the provision key). Each run boots a throw-away snapshot
# of it, copies this checkout's files over /opt/kiln and runs there.
set -eu
cd "$(dirname "$0")/.."
repo=$(pwd)

export STOCK_VM_DIR=${STOCK_VM_DIR:-/var/tmp/kiln-stock-vm}
tool=${STOCK_VM_TOOL:-$repo/../shared/tools/stock-vm.sh}
# the languages whose suites run in the guest: those its time allows under emulation
export KILN_VM_LANGS=${KILN_VM_LANGS:-python js cpp}
# kiln's Debian packages (scripts/setup.sh's, the languages' above, uidmap for rootless, git,
# wrk for the bench): in the image, installed natively when it is built, not under emulation
# (the tool's own list has python3-venv, gcc, make, systemd, iproute2)
GUEST_PACKAGES="git libcap-dev libseccomp2 python3-dev musl-tools haproxy nodejs npm g++ mold
  nlohmann-json3-dev uidmap wrk"
export STOCK_VM_PACKAGES="$GUEST_PACKAGES ${KILN_VM_PACKAGES:-}"

say() { echo "stock-vm-test: $*" >&2; }

need_tool() {
    [ -x "$tool" ] || { say "no $tool (the stock VM tool beside this checkout: ../shared/tools)"; exit 2; }
    missing=""
    for pkg in qemu-system-x86 qemu-utils mmdebstrap e2fsprogs; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing="$missing $pkg"
    done
    [ -z "$missing" ] && return
    say "installing$missing"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null; }
}

# What the provisioned image depends on: the packages, and what the guest's `provision` runs
# (its install_kiln: kiln's setup, the languages' installers, rootless.sh prepare).
provision_key() {
    {
        echo $GUEST_PACKAGES $KILN_VM_LANGS ${KILN_VM_PACKAGES:-}
        cat scripts/setup.sh scripts/rootless.sh pyproject.toml "$tool"
        for slug in $KILN_VM_LANGS; do cat "langs/$slug/install.sh" 2>/dev/null || true; done
    } | sha256sum | cut -c1-16
}

provision() {
    key=$(provision_key)
    [ -f "$STOCK_VM_DIR/rootfs.ext4" ] && [ "$(cat "$STOCK_VM_DIR/kiln-provisioned" 2>/dev/null || true)" = "$key" ] && return
    say "making the guest image (Debian's packages, then kiln installed in /opt/kiln: minutes)"
    # an image a provision wrote to (an older one, or one that stopped half-way) is made again
    # from Debian's packages; one the tool built and nothing has touched since is used as it is
    touched=""
    if [ -f "$STOCK_VM_DIR/kiln-provisioned" ] || [ -f "$STOCK_VM_DIR/kiln-provisioning" ]; then touched=1; fi
    rm -f "$STOCK_VM_DIR/kiln-provisioned"
    if [ -f "$STOCK_VM_DIR/rootfs.ext4" ] && [ -n "$touched" ]; then "$tool" build --force >/dev/null; else "$tool" build >/dev/null; fi
    touch "$STOCK_VM_DIR/kiln-provisioning"
    STOCK_VM_PERSIST=1 STOCK_VM_ENV=KILN_VM_LANGS guest provision
    echo "$key" > "$STOCK_VM_DIR/kiln-provisioned"
    rm -f "$STOCK_VM_DIR/kiln-provisioning"
}

# the guest runs a copy of its script (sh reads a script as it goes, and this checkout's may
# change on the host meanwhile), and copies the files git lists here, shared read-only
guest() {
    listed=$(mktemp -d "$STOCK_VM_DIR/files.XXXXXX")
    git ls-files -z --cached --others --exclude-standard > "$listed/files"
    status=0
    KILN_VM_FILES="$listed/files" STOCK_VM_SHARES="${STOCK_VM_SHARES:-} $listed" STOCK_VM_ENV="KILN_VM_FILES ${STOCK_VM_ENV:-}" \
        "$tool" run "$repo" sh -c 'cp scripts/stock-vm-guest.sh /run/kiln-guest.sh && exec sh /run/kiln-guest.sh "$@"' guest "$@" || status=$?
    rm -rf "$listed"
    return $status
}

in_guest() {
    STOCK_VM_ENV="KILN_VM_LANGS KILN_VM_BENCH_RUNS PYTEST_ARGS" guest "$@"
}

need_tool
case "${1:-test}" in
provision) provision ;;
test) provision && in_guest suites ;;
bench) provision && in_guest bench ;;
units) provision && in_guest units ;;
shell) provision && STOCK_VM_ENV=KILN_VM_LANGS "$tool" shell "$repo" ;;
run) shift && provision && in_guest run "$@" ;;
*) echo "usage: $0 [test|bench|units|shell|provision|run CMD...]" >&2 && exit 2 ;;
esac
