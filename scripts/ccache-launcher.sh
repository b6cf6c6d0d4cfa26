#!/usr/bin/env bash
# Prints the CMAKE_CXX_COMPILER_LAUNCHER value every build script uses when
# ccache is installed (nothing when it is not):
#
#   launcher="$(scripts/ccache-launcher.sh)"   # then -DCMAKE_CXX_COMPILER_LAUNCHER=$launcher
#
# The variables are set for every compile, not only the configure step: paths
# relative to the clone (CCACHE_BASEDIR) and no working directory in the hash
# (CCACHE_NOHASHDIR; -g1 would add it), so two clones of the same commit at
# different paths share the cache ($CCACHE_DIR, default ~/.cache/ccache).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if command -v ccache >/dev/null 2>&1; then
  echo "env;CCACHE_BASEDIR=${CCACHE_BASEDIR:-$here};CCACHE_NOHASHDIR=true;ccache"
fi
