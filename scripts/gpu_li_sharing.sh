#!/usr/bin/env bash
# load_inline throughput with N run workers sharing the GPU under the GPU lock (exclusive timing), N = 2, 3, 1,
# within about 9 minutes, then the exclusive-timing GPU test. From the repository root:
#   OUT=/tmp/out bash scripts/gpu_li_sharing.sh
# Each throughput run: 70 cold candidates (fresh cache, cold builds, cold eager + compile baselines), cut by
# --budget-s (LI_BUDGET_S, default 140 s after the sandbox is up) under an outer limit of budget + 40 s; the
# report covers the verdicts that landed (steady_state: first verdict to last). Writes under $OUT:
#   li_n<N>.json (benchmarks/sandbox/load_inline_throughput.py), li_n<N>_log.txt (one line per verdict),
#   gpu_test.txt (tests/sandbox/test_exclusive_timing.py -m gpu: timings under the lock vs alone), log.txt.
# LI_NS="2 3 1" sets the order (N = 1 last: the 2026-12-02 run measured it, 824/hour steady state).
set -uo pipefail
: "${OUT:?set OUT to an output directory}"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
step() {  # step NAME SECONDS CMD...: a timeout per step; never abort the script
  local name=$1 limit=$2; shift 2; local start=$SECONDS
  echo "=== $name (limit ${limit}s): $*"
  timeout --signal=TERM --kill-after=10 "$limit" "$@"
  echo "=== $name: rc=$? ($((SECONDS - start)) s)"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
nproc; date -u +%FT%TZ
budget=${LI_BUDGET_S:-140}
for n in ${LI_NS:-2 3 1}; do
  step "li_n$n" $((budget + 40)) python3 -m benchmarks.sandbox.load_inline_throughput --device cuda \
    --compile-workers "${LI_WORKERS:-14}" --run-workers-per-gpu "$n" --budget-s "$budget" \
    --out "$OUT/li_n$n.json" 2> >(tee "$OUT/li_n${n}_log.txt" >&2)
done
if [ -n "${GPU_TEST-1}" ]; then  # GPU_TEST= skips it
  step gpu_test 240 python3 -m pytest -q -s -m gpu tests/sandbox/test_exclusive_timing.py \
    2>&1 | tee "$OUT/gpu_test.txt"
fi
date -u +%FT%TZ
