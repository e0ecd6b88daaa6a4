#!/bin/sh
# Prepares the Dart workspace: writes .dart_tool/package_config.json (package `check` = this
# folder, at the installed SDK's language version). Dart has no Debian 12 package, and neither
# PyPI nor npm ships the SDK, so this script installs no toolchain: without `dart` (installed as
# README.md says) it prints one line and exits 0, and kiln does not serve dart.
set -eu
cd "$(dirname "$0")"

PATH=/usr/local/bin:/usr/bin:/bin  # kiln's sandbox PATH: a dart found elsewhere is no use to it
if ! dart=$(command -v dart); then
    echo "langs/dart/install.sh: skipped: no Dart SDK (not packaged for Debian 12, not on PyPI or npm); langs/dart/README.md says how to install one"
    exit 0
fi
case "$(readlink -f "$dart")" in
    /usr/*) ;;
    *) echo "langs/dart/install.sh: skipped: $dart resolves to $(readlink -f "$dart"), outside /usr: add its folder to dart's readonly_paths in kiln/langs.py" >&2
       exit 0 ;;
esac

# "Dart SDK version: 3.9.4 (stable) (…) on "linux_x64"" -> 3.9
language=$(dart --version 2>&1 | sed -n 's/^Dart SDK version: \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
if [ -z "$language" ]; then
    echo "langs/dart/install.sh: cannot read the SDK version from \`dart --version\`" >&2
    exit 1
fi
config=$(cat <<JSON
{
  "configVersion": 2,
  "packages": [
    {
      "name": "check",
      "rootUri": "../",
      "packageUri": "lib/",
      "languageVersion": "$language"
    }
  ],
  "generator": "kiln langs/dart/install.sh"
}
JSON
)
if [ "$(cat .dart_tool/package_config.json 2>/dev/null || true)" != "$config" ]; then
    echo "langs/dart/install.sh: writing .dart_tool/package_config.json (Dart $language)"
    mkdir -p .dart_tool
    printf '%s\n' "$config" > .dart_tool/package_config.json
    chmod -R a+rX .dart_tool
fi
