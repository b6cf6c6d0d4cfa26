#!/usr/bin/env bash
# README command 1: install the dependencies (Debian packages, the pinned
# PyTorch in .venv), build normdoctor against LibTorch 2.13, and run
# normdoctor check on the bundled example model (fixtures/example.pt: the
# seed story, twenty linear layers whose activations grow from ~0.3 to ~80,000).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
scripts/install-deps.sh
scripts/setup-venv.sh
scripts/configure.sh primary build
cmake --build build --target normdoctor
set +e
./build/normdoctor check fixtures/example.pt --input fixtures/example.input.pt
rc=$?
set -e
# The example has warnings and --fail-on defaults to warning: exit 1 is the
# expected result; anything else is a failure of the set-up.
echo "normdoctor exited with $rc (expected 1: the example's warnings are at or above --fail-on warning, the default)"
[ "$rc" -eq 1 ]
