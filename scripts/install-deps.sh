#!/usr/bin/env bash
# Installs the Debian packages normdoctor needs (.ci/packages.txt, or the
# list given as the first argument, e.g. .ci/packages-fuzz.txt).
# Skips apt-get when everything is already installed.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
list="${1:-$here/.ci/packages.txt}"
mapfile -t pkgs < <(grep -v '^\s*#' "$list" | sed '/^\s*$/d')
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
