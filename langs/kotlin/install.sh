#!/bin/sh
# Installs the Kotlin toolchain: JDK 17 and gson from Debian, the Kotlin compiler from npm's
# kotlin-compiler package (JetBrains' compiler distribution, pinned below) under /usr/local, with
# /usr/local/bin/kotlinc and kotlin linked to its scripts. Then prepares the workspace: kiln's
# launcher (runner/run.jar) and the class data sharing archive of the compiler, kotlin-stdlib and
# gson (runner/run.jsa), dumped with the test command's own JVM flags. Idempotent; silent when
# already done.
set -eu
cd "$(dirname "$0")"

KOTLIN_VERSION=1.9.25
home=/usr/local/lib/node_modules/kotlin-compiler
packages="openjdk-17-jdk-headless libgoogle-gson-java"
stamp=runner/.kiln-stamp
want=$( (cat Makefile runner/Run.java runner/Build.java runner/warmup/*.kt; echo "$KOTLIN_VERSION") | sha256sum | cut -d' ' -f1)

jdk_ready() {
    command -v javac >/dev/null 2>&1 && command -v jar >/dev/null 2>&1 && [ -f /usr/share/java/gson.jar ]
}
kotlin_ready() {
    # build.txt holds the version, e.g. 1.9.25-release-852
    case "$(cat "$home/build.txt" 2>/dev/null || true)" in
        "$KOTLIN_VERSION" | "$KOTLIN_VERSION"-*) ;;
        *) return 1 ;;
    esac
    [ -x /usr/local/bin/kotlinc ] && [ -x /usr/local/bin/kotlin ]
}

if jdk_ready && kotlin_ready && [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ] && make -s verify >/dev/null 2>&1; then
    exit 0
fi

if ! jdk_ready; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "langs/kotlin/install.sh: kotlin not installed: needs Debian's $packages (no apt-get here)"
        exit 0
    fi
    echo "langs/kotlin/install.sh: installing $packages"
    apt() { apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $packages >/tmp/kiln-kotlin-apt.log 2>&1; }
    if ! apt; then
        apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null 2>&1 || true
        if ! apt; then
            echo "langs/kotlin/install.sh: kotlin not installed: apt-get install $packages failed (see /tmp/kiln-kotlin-apt.log)"
            exit 0
        fi
    fi
    rm -f /tmp/kiln-kotlin-apt.log
fi

if ! kotlin_ready; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "langs/kotlin/install.sh: kotlin not installed: the compiler comes from npm (kotlin-compiler), and npm is missing"
        exit 0
    fi
    echo "langs/kotlin/install.sh: installing the Kotlin compiler $KOTLIN_VERSION (npm kotlin-compiler) under /usr/local"
    log=$(mktemp)
    if ! npm install -g --prefix /usr/local "kotlin-compiler@$KOTLIN_VERSION" --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
        echo "langs/kotlin/install.sh: kotlin not installed: npm install kotlin-compiler@$KOTLIN_VERSION failed:"
        cat "$log"
        rm -f "$log"
        exit 0
    fi
    rm -f "$log"
    # the package links only kotlinc-js; the JVM compiler's scripts resolve their home through links
    ln -sfn ../lib/node_modules/kotlin-compiler/bin/kotlinc /usr/local/bin/kotlinc
    ln -sfn ../lib/node_modules/kotlin-compiler/bin/kotlin /usr/local/bin/kotlin
fi

echo "langs/kotlin/install.sh: preparing the workspace (launcher, class data sharing archive)"
rm -f "$stamp"
make -s prepare
make -s verify >/dev/null
echo "$want" > "$stamp"
