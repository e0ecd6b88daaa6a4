#!/bin/sh
# Installs the Clojure toolchain from Debian (clojure 1.11, clojure.data.json, JDK 17 for the
# `jar` tool) and prepares the workspace: the harness compiled ahead of time (runner/harness.jar)
# and the class data sharing archive of Clojure and the harness (runner/run.jsa), dumped with the
# test command's own JVM flags. Idempotent; silent when already done.
set -eu
cd "$(dirname "$0")"

packages="clojure libdata-json-clojure openjdk-17-jdk-headless"
stamp=runner/.kiln-stamp
want=$(cat Makefile runner/src/kiln/harness.clj runner/warmup/* | sha256sum | cut -d' ' -f1)

ready() {
    command -v java >/dev/null 2>&1 && command -v jar >/dev/null 2>&1 && command -v clojure >/dev/null 2>&1 \
        && [ -f /usr/share/java/clojure-1.11.jar ] && [ -f /usr/share/java/data.json.jar ]
}

if ready && [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ] && make -s verify >/dev/null 2>&1; then
    exit 0
fi

if ! ready; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "langs/clojure/install.sh: clojure not installed: needs Debian's $packages (no apt-get here)"
        exit 0
    fi
    echo "langs/clojure/install.sh: installing $packages"
    apt() { apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $packages >/tmp/kiln-clojure-apt.log 2>&1; }
    if ! apt; then
        apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null 2>&1 || true
        if ! apt; then
            echo "langs/clojure/install.sh: clojure not installed: apt-get install $packages failed (see /tmp/kiln-clojure-apt.log)"
            exit 0
        fi
    fi
    rm -f /tmp/kiln-clojure-apt.log
fi

echo "langs/clojure/install.sh: preparing the workspace (compiled harness, class data sharing archive)"
rm -f "$stamp"
make -s prepare
make -s verify >/dev/null
echo "$want" > "$stamp"
