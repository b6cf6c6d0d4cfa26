#!/usr/bin/env bash
# Builds the torch-free unit tests (nd_unit_tests: formats, rules, config,
# report, CLI helpers) with AddressSanitizer and UndefinedBehaviorSanitizer
# (-DNORMDOCTOR_SANITIZE=ON) in build-asan/ and runs them. Any sanitizer
# report fails the run (halt_on_error).
#
#   scripts/sanitize.sh                 the unit tests (CI runs this)
#   scripts/sanitize.sh TARGET...       also these torch test targets (nd_model_tests,
#                                       nd_torch_tests); ND_SANITIZE_FILTER='E2EErrors.*'
#                                       runs only the matching cases of them
#                                       (slow: a full LibTorch build; docs/bad-inputs.md
#                                       records what was run and the result)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
scripts/install-deps.sh
# ccache when installed (as scripts/configure.sh); -g1: line tables are all
# a sanitizer report needs for file:line frames, at half the compile time of -g;
# -O1, as the AddressSanitizer documentation recommends (its instrumented
# -O2 batches took 200-255 s each on the 2-core CI machine).
launcher="${CMAKE_CXX_COMPILER_LAUNCHER:-}"
[ -n "$launcher" ] || launcher="$(scripts/ccache-launcher.sh)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DNORMDOCTOR_SANITIZE=ON -DNORMDOCTOR_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD="${ND_UNITY_BUILD:-ON}" ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} >/dev/null
cmake --build build-asan --target nd_unit_tests "$@"
# LibTorch's own allocations at exit are not ours to fix: leaks are checked in
# the torch-free tests only.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
build-asan/tests/nd_unit_tests --gtest_brief=1
for t in "$@"; do
  case "$t" in
    nd_*_tests)
      # The e2e tests run the ASan-built normdoctor binary (ND_BINARY).
      ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" build-asan/tests/"$t" --gtest_brief=1 \
        --gtest_filter="${ND_SANITIZE_FILTER:-*}" ;;
  esac
done
echo "sanitize: no AddressSanitizer/UndefinedBehaviorSanitizer report"
