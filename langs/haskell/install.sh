#!/bin/sh
# Installs GHC, aeson and the libraries Codebattle's Haskell checkers may import (Debian packages),
# plus LLD, and builds the workspace's precompiled C `main` (boot/main.o). Idempotent, and silent
# when everything is already in place. Run as root on Debian 12.
set -eu
cd "$(dirname "$0")"

# aeson for the checker; the rest is the list Codebattle's Haskell image ships (its solution
# template names them); base, bytestring, containers, deepseq, directory, mtl, pretty,
# template-haskell, text, time and transformers come with ghc itself.
PACKAGES="ghc lld libghc-aeson-dev libghc-case-insensitive-dev libghc-fgl-dev
  libghc-integer-logarithms-dev libghc-megaparsec-dev libghc-parser-combinators-dev
  libghc-random-dev libghc-regex-base-dev libghc-regex-compat-dev libghc-regex-posix-dev
  libghc-scientific-dev libghc-split-dev libghc-unordered-containers-dev libghc-vector-dev
  libghc-vector-algorithms-dev"

installed=" $(dpkg-query -W -f='${Package} ${Status}\n' $PACKAGES 2>/dev/null | sed -n 's/ install ok installed$//p' | tr '\n' ' ' || true) "
missing=""
for pkg in $PACKAGES; do
    case "$installed" in
        *" $pkg "*) ;;
        *) missing="$missing $pkg" ;;
    esac
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "langs/haskell/install.sh: missing Debian packages:$missing (run as root)" >&2
        exit 1
    fi
    echo "langs/haskell/install.sh: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt="apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends"
    $apt $missing >/dev/null \
        || { apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null && $apt $missing >/dev/null; }
fi

# The checker's C main, compiled once (see boot/main.c); rebuilt when the source or GHC changes.
stamp="$(sha256sum boot/main.c | cut -d' ' -f1) $(dpkg-query -W -f='${Version}' ghc)"
if [ ! -f boot/main.o ] || [ "$(cat boot/.main.o.stamp 2>/dev/null || true)" != "$stamp" ]; then
    echo "langs/haskell/install.sh: compiling boot/main.o"
    ghc -v0 -c -dynamic boot/main.c -o boot/main.o.tmp
    mv boot/main.o.tmp boot/main.o
    chmod 644 boot/main.o
    echo "$stamp" > boot/.main.o.stamp
fi
