#!/bin/sh
# What tests/deploy needs, installed idempotently and silently when already there (run by
# `make test` after scripts/setup.sh, which made .venv):
#   - kubernetes-validate (PyPI) into .venv: validates deploy/kubernetes/ offline against the
#     Kubernetes JSON schemas it bundles (every version from 1.25 on);
#   - promtool, taken from Debian's `prometheus` package into build/deploy-tools/ without
#     installing the package: installing it would also install and, under systemd, start a
#     Prometheus server. No smaller Debian package ships promtool.
set -eu
cd "$(dirname "$0")/.."

VALIDATE_VERSION=1.37.0
TOOLS=build/deploy-tools

have=$(.venv/bin/python -c 'import kubernetes_validate.version as v; print(v.__version__)' 2>/dev/null || true)
if [ "$have" != "$VALIDATE_VERSION" ]; then
    echo "install-deploy-tools: installing kubernetes-validate $VALIDATE_VERSION into .venv"
    log=$(mktemp)
    if ! .venv/bin/pip install -q --disable-pip-version-check "kubernetes-validate==$VALIDATE_VERSION" >"$log" 2>&1; then
        cat "$log" >&2; rm -f "$log"; exit 1
    fi
    rm -f "$log"
fi

if ! "$TOOLS/promtool" --version >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "install-deploy-tools: promtool is missing from $TOOLS (run as root, or put promtool there)" >&2
        exit 1
    fi
    echo "install-deploy-tools: extracting promtool from Debian's prometheus package into $TOOLS"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    fetch() { (cd "$work" && apt-get download -q -o APT::Sandbox::User=root prometheus >/dev/null 2>&1); }
    fetch || { apt-get update -q >/dev/null && fetch; } || { echo "install-deploy-tools: cannot download Debian's prometheus package" >&2; exit 1; }
    dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work" ./usr/bin/promtool
    mkdir -p "$TOOLS"
    install -m 0755 "$work/usr/bin/promtool" "$TOOLS/promtool"
fi
