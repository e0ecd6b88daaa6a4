#!/bin/sh
# Installs the C# toolchain from Debian (Mono's mcs and runtime, Newtonsoft.Json) and prepares the
# workspace: kiln's launcher (runner/run.exe). Like Debian's own packages do for mscorlib and
# mcs.exe (dh_monoaot), it also compiles ahead of time the assemblies every run loads (System,
# System.Core, System.Xml, System.Numerics, Newtonsoft.Json) into Mono's AOT cache, so that runs
# do not JIT them. Idempotent; silent when already done.
set -eu
cd "$(dirname "$0")"

packages="mono-mcs mono-runtime libnewtonsoft-json-cil-dev"
newtonsoft=/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll
aot_assemblies="System System.Core System.Xml System.Numerics Newtonsoft.Json"
stamp=runner/.kiln-stamp

ready() {
    command -v mcs >/dev/null 2>&1 && command -v mono >/dev/null 2>&1 && [ -f "$newtonsoft" ] && [ -d /etc/mono ]
}
# The GAC copies of the assemblies to precompile (the runtime loads these, not /usr/lib/cli's).
gac_paths() {
    for name in $aot_assemblies; do
        find /usr/lib/mono/gac/"$name" -name "$name.dll" 2>/dev/null | sort | tail -n 1
    done
}
wanted() {
    (cat Makefile runner/Run.cs runner/warmup/*.cs; gac_paths | xargs -r md5sum) | sha256sum | cut -d' ' -f1
}

if ready && [ -f runner/run.exe ] && [ "$(cat "$stamp" 2>/dev/null || true)" = "$(wanted)" ]; then
    exit 0
fi

if ! ready; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "langs/csharp/install.sh: csharp not installed: needs Debian's $packages (no apt-get here)"
        exit 0
    fi
    echo "langs/csharp/install.sh: installing $packages"
    apt() { apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends $packages >/tmp/kiln-csharp-apt.log 2>&1; }
    if ! apt; then
        apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null 2>&1 || true
        if ! apt; then
            echo "langs/csharp/install.sh: csharp not installed: apt-get install $packages failed (see /tmp/kiln-csharp-apt.log)"
            exit 0
        fi
    fi
    rm -f /tmp/kiln-csharp-apt.log
fi

echo "langs/csharp/install.sh: preparing the workspace (launcher, AOT images of the common assemblies)"
rm -f "$stamp"
make -s prepare
# Mono looks for AOT images of GAC assemblies in /usr/lib/mono/aot-cache/<arch>/, where Debian's
# packages put mscorlib's and mcs's. Without an assembler and linker (binutils) this is skipped:
# the runs then JIT those assemblies, slower but the same.
cache=$(dirname "$(find /usr/lib/mono/aot-cache -name mscorlib.dll.so 2>/dev/null | head -n 1)")
if [ "$cache" != "." ] && command -v as >/dev/null 2>&1 && command -v ld >/dev/null 2>&1; then
    for dll in $(gac_paths); do
        mono --aot=outfile="$cache/$(basename "$dll").so" -O=all "$dll" >/dev/null 2>&1 \
            || echo "langs/csharp/install.sh: could not precompile $dll (runs will JIT it)"
    done
fi
wanted > "$stamp"
