#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, torch-free: formats, rule files,
# config) with clang in build-fuzz/ and runs each for a bounded time on a
# copy of its seed corpus. Exit status 1 when any target finds a crash, a
# sanitizer report, a leak or an allocation over the limit; the input is
# kept in build-fuzz/findings/TARGET/ (add it to tests/fuzz/corpus/TARGET
# as a regression file once fixed).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 20; CI runs the default)
#
# Env: ND_FUZZ_TARGETS="fuzz_config fuzz_rule_file" runs only those.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
seconds="${1:-20}"
targets=(${ND_FUZZ_TARGETS:-fuzz_pickle fuzz_checkpoint fuzz_safetensors fuzz_input_spec fuzz_zip_index fuzz_pt2_archive fuzz_rule_file fuzz_rule_cases fuzz_config})

scripts/install-deps.sh
scripts/install-deps.sh .ci/packages-fuzz.txt
launcher=()
l="$(scripts/ccache-launcher.sh)"  # as scripts/configure.sh
[ -z "$l" ] || launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=$l")
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build build-fuzz --target "${targets[@]}"

failed=()
for t in "${targets[@]}"; do
  work="build-fuzz/corpus/$t"           # grows; the seed corpus stays as committed
  findings="build-fuzz/findings/$t"
  rm -rf "$work" "$findings"
  mkdir -p "$work" "$findings"
  seeds="tests/fuzz/corpus/$t"
  [ -d "$seeds" ] || seeds=""
  dict=()
  { [ "$t" = fuzz_pickle ] || [ "$t" = fuzz_checkpoint ]; } && dict=(-dict=tests/fuzz/pickle.dict)
  echo "fuzz: $t for ${seconds}s"
  # Replays every seed first (regression files included), then mutates.
  if ! "build-fuzz/$t" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -malloc_limit_mb=256 -rss_limit_mb=1024 \
       -print_final_stats=1 -artifact_prefix="$findings/" "$work" $seeds >"build-fuzz/$t.log" 2>&1; then
    failed+=("$t")
    tail -n 40 "build-fuzz/$t.log"
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build-fuzz/$t.log" | sed "s/^/  $t /" || true
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (inputs under build-fuzz/findings/)"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no findings"
