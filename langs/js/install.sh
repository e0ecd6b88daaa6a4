#!/bin/sh
# Installs the npm packages that js solutions may require (lodash, rambda: see package.json) into
# langs/js/node_modules, exactly as package-lock.json pins them. Idempotent, and silent when they
# are already installed from the current lock.
set -eu
cd "$(dirname "$0")"

stamp=node_modules/.kiln-lock
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ] \
    && [ -f node_modules/lodash/package.json ] && [ -f node_modules/rambda/package.json ]; then
    exit 0
fi

echo "langs/js/install.sh: installing lodash and rambda into langs/js/node_modules"
log=$(mktemp)
# `npm ci`: `npm install` held to the lock (it never rewrites package-lock.json)
if ! npm ci --omit=dev --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    exit 1
fi
rm -f "$log"
echo "$want" > "$stamp"
