#!/usr/bin/env bash
# Configures a build folder against one of normdoctor's two LibTorch builds.
#
#   scripts/configure.sh primary [BUILD_DIR] [CMAKE_ARGS...]   # LibTorch 2.13 from .venv's torch wheel (default: build/)
#   scripts/configure.sh compat  [BUILD_DIR] [CMAKE_ARGS...]   # Debian's libtorch-dev 1.13 (default: build-1.13/)
#
# primary needs scripts/setup-venv.sh first. Both CMAKE_PREFIX_PATH entries
# are needed: TorchConfig.cmake searches <prefix>/lib, and with only the
# share/cmake folder CMake would link Debian's /usr/lib/libtorch.so against
# the wheel's headers (CMakeLists.txt refuses such a mix).
# ccache is used when installed ($CCACHE_DIR, default ~/.cache/ccache).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
which="${1:-primary}"; shift || true
launcher=()
l="$(scripts/ccache-launcher.sh)"  # shared across clones (scripts/ccache-launcher.sh)
[ -z "$l" ] || launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=$l")
case "$which" in
  primary)
    dir="${1:-build}"; shift || true
    venv="${ND_VENV:-$here/.venv}"
    [ -x "$venv/bin/python" ] || { echo "configure: $venv missing: run scripts/setup-venv.sh" >&2; exit 2; }
    t="$("$venv/bin/python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')"
    prefix=(-DCMAKE_PREFIX_PATH="$t/share/cmake;$t") ;;
  compat)
    dir="${1:-build-1.13}"; shift || true
    # The torch-free unit tests are the same code on both builds: the
    # primary and sanitizer builds run them.
    prefix=(-DNORMDOCTOR_BUILD_UNIT_TESTS=OFF) ;;
  *) echo "configure: unknown build '$which' (expected primary or compat)" >&2; exit 2 ;;
esac
# Unity builds (CMAKE_UNITY_BUILD, batches of 8 files): every file that
# includes LibTorch's headers spends about 20 s parsing them, so one batch
# parses them once for 8 files; a cold primary build takes 8 minutes on 2
# cores instead of 19. ND_UNITY_BUILD=OFF compiles file by file (faster
# rebuilds after editing one file; CI builds with the default).
unity="${ND_UNITY_BUILD:-ON}"
# -g1 (line tables: file:line in backtraces and sanitizer reports) instead
# of CMake's -g: full debug info of LibTorch's templates doubles the compile
# time of every file that includes torch/script.h and of every link.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD="$unity" "${launcher[@]}" "${prefix[@]}" "$@" >"$dir.configure.log" 2>&1 \
  || { cat "$dir.configure.log"; exit 1; }
grep -E "^-- normdoctor:" "$dir.configure.log" || true
