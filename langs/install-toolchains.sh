#!/bin/sh
# Installs each language's toolchain and prepares its workspace ahead of time (langs/<slug>/
# install.sh), then marks the workspace ready (.installed): kiln serves a workspace that has an
# install.sh only once it is marked. Idempotent; quiet when everything is in place.
#
#   langs/install-toolchains.sh            every language
#   langs/install-toolchains.sh js python  just these
#
# A toolchain this host cannot have (dart; swift before glibc 2.38) is skipped by its install.sh
# with a message; its workspace is still marked, and kiln reports the missing toolchain.
set -eu
cd "$(dirname "$0")"
slugs=${*:-$(for d in */; do [ -f "$d/Makefile" ] && printf '%s ' "${d%/}"; done)}
failed=""
for slug in $slugs; do
    if [ ! -f "$slug/Makefile" ]; then
        echo "langs: no workspace $slug" >&2
        failed="$failed $slug"
        continue
    fi
    [ -f "$slug/install.sh" ] || continue
    if sh "$slug/install.sh"; then
        touch "$slug/.installed"
    else
        rm -f "$slug/.installed"
        failed="$failed $slug"
    fi
done
if [ -n "$failed" ]; then
    echo "langs: preparing failed for:$failed" >&2
    exit 1
fi
