#!/bin/sh
# Installs the Java toolchain from Debian (JDK 17, gson) and prepares the workspace: kiln's
# launcher (runner/run.jar) and the class data sharing archive of javac + gson (runner/run.jsa),
# dumped here with the test command's own JVM flags. Idempotent; silent when already done.
set -eu
cd "$(dirname "$0")"

packages="openjdk-17-jdk-headless libgoogle-gson-java"
stamp=runner/.kiln-stamp
want=$(cat Makefile runner/Run.java runner/Build.java runner/warmup/*.java | sha256sum | cut -d' ' -f1)

ready() {
    command -v javac >/dev/null 2>&1 && command -v jar >/dev/null 2>&1 && [ -f /usr/share/java/gson.jar ]
}

if ready && [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ] && make -s verify >/dev/null 2>&1; then
    exit 0
fi

if ! ready; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "langs/java/install.sh: java not installed: needs Debian's $packages (no apt-get here)"
        exit 0
    fi
    echo "langs/java/install.sh: installing $packages"
    apt() { apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $packages >/tmp/kiln-java-apt.log 2>&1; }
    if ! apt; then
        apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null 2>&1 || true
        if ! apt; then
            echo "langs/java/install.sh: java not installed: apt-get install $packages failed (see /tmp/kiln-java-apt.log)"
            exit 0
        fi
    fi
    rm -f /tmp/kiln-java-apt.log
fi

echo "langs/java/install.sh: preparing the workspace (launcher, class data sharing archive)"
rm -f "$stamp"
make -s prepare
make -s verify >/dev/null
echo "$want" > "$stamp"
