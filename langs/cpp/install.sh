#!/bin/sh
# Installs the C++ toolchain (Debian's g++, mold and nlohmann-json3-dev), precompiles kiln's
# prelude (prelude/kiln.hpp -> prelude/kiln.hpp.gch, with prelude/nlohmann-json.hpp) with the
# Makefile's flags and builds the helpers' library (prelude/libkiln.a), so a request only parses
# and compiles its own two files.
# Idempotent, and silent when everything is already in place (a stamp holds a fingerprint of the
# prelude, the Makefile, this script and the installed package versions).
set -eu
cd "$(dirname "$0")"
export PATH=/usr/local/bin:/usr/bin:/bin LC_ALL=C

stamp=.kiln-installed

fingerprint() {
    {
        cat Makefile install.sh prelude/kiln.hpp prelude/kiln.cpp prelude/json-literals.awk linker/ld json.hpp fifo_map.hpp
        g++ -dumpfullversion 2>/dev/null || true
        dpkg-query -W -f='${Package} ${Version}\n' g++ mold nlohmann-json3-dev 'libstdc++-*-dev' 2>/dev/null || true
    } | sha256sum | cut -d' ' -f1
}

if command -v g++ >/dev/null 2>&1 && command -v ld.mold >/dev/null 2>&1 && [ -f /usr/include/nlohmann/json.hpp ] && [ -f prelude/kiln.hpp.gch ] && [ -f prelude/libkiln.a ] && [ -f judge-pch/bits/stdc++.h.gch ] \
    && [ "$(cat "$stamp" 2>/dev/null || true)" = "$(fingerprint)" ]; then
    exit 0
fi

if ! command -v g++ >/dev/null 2>&1 || ! command -v ld.mold >/dev/null 2>&1 || [ ! -f /usr/include/nlohmann/json.hpp ]; then
    echo "langs/cpp/install.sh: installing g++, mold and nlohmann-json3-dev (apt)"
    log=$(mktemp)
    if ! apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends g++ mold nlohmann-json3-dev >"$log" 2>&1; then
        echo "langs/cpp/install.sh: cpp not installed: apt-get install g++ mold nlohmann-json3-dev failed: $(tail -n 1 "$log")"
        rm -f "$log"
        exit 0
    fi
    rm -f "$log"
fi

echo "langs/cpp/install.sh: precompiling prelude/kiln.hpp, building prelude/libkiln.a"
rm -rf prelude/kiln.hpp.gch prelude/libkiln.a prelude/nlohmann-json.hpp judge-pch "$stamp"
make -s prelude
make -s judge-pch
chmod a+r prelude/kiln.hpp.gch prelude/libkiln.a judge-pch/bits/stdc++.h.gch
fingerprint > "$stamp"
