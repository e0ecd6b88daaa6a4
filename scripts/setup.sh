#!/bin/sh
# Prepares this machine for `make run` and `make test`: Debian packages, then .venv built from the
# system Python (never a pyenv shim: hosts and CI must match production). Idempotent and silent
# when everything is already in place. Arguments: more Debian packages (`make bench`: wrk).
set -eu
cd "$(dirname "$0")/.."

APT_PACKAGES="libcap-dev libseccomp2 python3-venv python3-dev gcc libc6-dev musl-tools make systemd iproute2 haproxy $*"
# node and npm may come from NodeSource (one package) or Debian (two): ask for what is missing
command -v node >/dev/null 2>&1 || APT_PACKAGES="$APT_PACKAGES nodejs"
command -v npm >/dev/null 2>&1 || APT_PACKAGES="$APT_PACKAGES npm"

missing=""
for pkg in $APT_PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    case "$status" in
        *"ok installed") ;;
        *) missing="$missing $pkg" ;;
    esac
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup: these Debian packages are missing:$missing (run as root, or install them)" >&2
        exit 1
    fi
    echo "setup: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends $missing >/dev/null \
        || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $missing >/dev/null; }
fi

# kiln's own user, which its HTTP front drops to (RUN_FRONT_USER's default) and which alone reads
# the cached builds and the file store: a user no other process of the host runs as (README,
# "Who owns what"). scripts/rootless.sh makes the same user for a rootless kiln.
if ! id -u kiln >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup: the user kiln is missing (run as root, or: useradd --system --user-group --no-create-home --shell /usr/sbin/nologin kiln)" >&2
        exit 1
    fi
    PATH="$PATH:/usr/sbin:/sbin" useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kiln
fi

VENV=.venv
STAMP=$VENV/.kiln-installed
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -x $VENV/bin/python ]; then
    echo "setup: creating $VENV from /usr/bin/python3"
    /usr/bin/python3 -m venv $VENV
fi
if [ "$(cat $STAMP 2>/dev/null || true)" != "$want" ]; then
    echo "setup: installing kiln and its dependencies into $VENV"
    log=$(mktemp)
    if ! $VENV/bin/pip install -q --disable-pip-version-check -e '.[test]' >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; exit 1
    fi
    rm -f "$log"
    echo "$want" > $STAMP
fi

# kiln's native parts (the slot's init, the zygote's spawn helper): make rebuilds what changed
make -s -C kiln/native
