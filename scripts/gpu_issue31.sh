#!/usr/bin/env bash
# One device call for issue 31's GPU checks after the merge (run from the repo root, with $OUT):
#   1. scripts/gpu_hacks.sh: the guard's GPU tests and the GPU red-team corpus (race probe, the new GPU attacks,
#      the GEMM + fused-epilogue legit case) -> $OUT/hacks.log, $OUT/hacks_results.json;
#   2. the degenerate-task audit of KernelBench L1-3 with the default (free-memory) input budget ->
#      $OUT/audit.jsonl, $OUT/audit.log;
#   3. the sandbox GPU tests -> $OUT/sandbox_gpu.log.
set -uo pipefail
: "${OUT:?set OUT}"
KB=${KERNELBENCH_DIR:-shared/kernelbench}
[ -d "$KB" ] || KB=../shared/kernelbench
echo "kernelbench: $KB $(ls "$KB" 2>&1 | tr "\n" " ")" | tee "$OUT/versions.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/versions.txt"
start=$SECONDS
timeout 300 env OUT="$OUT" bash scripts/gpu_hacks.sh >/dev/null 2>&1
echo "hacks: rc $? in $((SECONDS - start)) s" | tee -a "$OUT/versions.txt"
t=$SECONDS
for level in 1 2 3; do
  timeout 150 python -m kernels_env audit --problems "$KB/level$level" --device cuda --out "$OUT/audit.jsonl" \
    --no-progress >>"$OUT/audit.log" 2>&1
  echo "audit level$level: rc $?" >>"$OUT/audit.log"
done
echo "audit: $((SECONDS - t)) s, $(wc -l <"$OUT/audit.jsonl") problems" | tee -a "$OUT/versions.txt"
t=$SECONDS
timeout 150 python -m pytest -q -x --tb=short -p no:cacheprovider tests/sandbox/test_gpu.py -m "gpu and not slow" \
  >"$OUT/sandbox_gpu.log" 2>&1
echo "sandbox gpu tests: rc $? in $((SECONDS - t)) s" | tee -a "$OUT/versions.txt"
