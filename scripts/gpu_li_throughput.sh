#!/usr/bin/env bash
# Issue 12's load_inline throughput on one GPU machine, then the load_inline peer of sandbox_throughput in its
# fastest documented form (alone and concurrently). From the repository root:
#   OUT=/tmp/out bash scripts/gpu_li_throughput.sh
# Steps have their own limits (LI_LIMIT_S, PEER_LIMIT_S); every step writes its JSON as it ends, under $OUT:
#   li.json (benchmarks/sandbox/load_inline_throughput.py: 70 cold candidates, cold eager+compile baselines),
#   li_log.txt (one line per verdict), peer.json (sandbox_throughput compile: fast path vs load_inline, plain
#   and fastest form), log.txt (everything).
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
step li "${LI_LIMIT_S:-330}" python3 -m benchmarks.sandbox.load_inline_throughput --device cuda \
  --compile-workers "${LI_WORKERS:-14}" --out "$OUT/li.json" 2> >(tee "$OUT/li_log.txt" >&2)
step peer "${PEER_LIMIT_S:-240}" python3 -m benchmarks.sandbox.sandbox_throughput compile --out "$OUT/peer.json" \
  --tasks "${PEER_TASKS:-01_relu,05_softmax}" --load-inline-tasks "${PEER_TASKS:-01_relu,05_softmax}" \
  --concurrency 2 --deadline-s 200 --build-timeout-s 200
date -u +%FT%TZ
