#!/usr/bin/env bash
# The CUDA check (issue: platform, item 6), for a machine with an NVIDIA GPU
# and a CUDA build of PyTorch installed (python -c 'import torch;
# print(torch.cuda.is_available())' prints True).
#
#   scripts/gpu-check.sh [PYTHON]        # default: python3 on PATH
#
# 1. builds normdoctor against that PyTorch's LibTorch in build-cuda/;
# 2. runs `normdoctor check --device cuda` on every model of the real-model
#    corpus (corpus/) with its batch, and on the CPU for comparison: exit
#    codes and findings must agree (rule id, failure mode, layer);
# 3. runs the benchmark (bench/) on CUDA and prints its ratio lines.
# Prints one line per model and the benchmark's summary lines; exits 1 when
# a model's findings differ between CPU and CUDA or a check fails.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
py="${1:-python3}"
"$py" -c 'import torch, sys; print("gpu-check: torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available()); sys.exit(0 if torch.cuda.is_available() else 1)' \
  || { echo "gpu-check: no CUDA device visible to $py's torch" >&2; exit 2; }
t="$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')"
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DNORMDOCTOR_BUILD_TESTS=OFF \
  -DCMAKE_PREFIX_PATH="$t/share/cmake;$t" >build-cuda.configure.log 2>&1 || { cat build-cuda.configure.log; exit 1; }
cmake --build build-cuda --target normdoctor normdoctor_bench
nd=build-cuda/normdoctor
out=build-cuda/gpu-check; mkdir -p "$out"
status=0
summarize() { "$py" - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r.get("status"), sorted((f["rule_id"], f["failure_mode"], f.get("layer") or "") for f in r.get("findings", [])))
PY
}
for m in corpus/*.pt; do
  case "$m" in *.input.pt) continue ;; esac
  name="$(basename "$m" .pt)"
  in="corpus/$name.input.pt"; args=(); [ -f "$in" ] && args=(--input "$in")
  s0=$(date +%s.%N)
  set +e
  "$nd" check "$m" "${args[@]}" --format json -o "$out/$name.cpu.json" -q; rc_cpu=$?
  s1=$(date +%s.%N)
  "$nd" check "$m" "${args[@]}" --device cuda --format json -o "$out/$name.cuda.json" -q; rc_gpu=$?
  s2=$(date +%s.%N)
  set -e
  a="$(summarize "$out/$name.cpu.json")"; b="$(summarize "$out/$name.cuda.json")"
  same=same; [ "$a" = "$b" ] && [ "$rc_cpu" = "$rc_gpu" ] || { same=DIFFERENT; status=1; }
  printf 'gpu-check: %-28s exit cpu=%s cuda=%s  cpu %.2fs cuda %.2fs  findings %s\n' "$name" "$rc_cpu" "$rc_gpu" \
    "$(echo "$s1 - $s0" | bc)" "$(echo "$s2 - $s1" | bc)" "$same"
done
bench_dir="${ND_BENCH_MODELS:-/tmp/ndbench}"
if [ -d "$bench_dir" ]; then
  build-cuda/bench/normdoctor_bench "$bench_dir" --device cuda | tail -n 20
else
  echo "gpu-check: no benchmark models in $bench_dir (make them with: $py fixtures/make_bench_models.py $bench_dir)"
fi
exit $status
