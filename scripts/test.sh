#!/usr/bin/env bash
# README command 2: install the dependencies (Debian packages, the pinned
# PyTorch in .venv), build everything against LibTorch 2.13 and run every test.
#
#   scripts/test.sh              # the primary build (build/, LibTorch 2.13 from the torch wheel)
#   scripts/test.sh compat       # the compatibility build (build-1.13/, Debian's LibTorch 1.13)
#
# On the compatibility build, tests of files that LibTorch 1.13 cannot load
# (operators it lacks, a newer file format) are skipped with the reason printed.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
which="${1:-primary}"
scripts/install-deps.sh
case "$which" in
  primary) scripts/setup-venv.sh; dir=build ;;
  compat) dir=build-1.13 ;;
  *) echo "test.sh: unknown build '$which' (expected primary or compat)" >&2; exit 2 ;;
esac
start=$(date +%s)
scripts/configure.sh "$which" "$dir"
cmake --build "$dir"
built=$(date +%s)
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)"
echo "test.sh ($which): build $((built - start)) s, tests $(( $(date +%s) - built )) s"
