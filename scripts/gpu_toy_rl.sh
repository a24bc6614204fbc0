#!/usr/bin/env bash
# Issue 14's learning demonstration on one GPU, time-boxed (10 minutes on an H200):
#   OUT=/tmp/out bash scripts/gpu_toy_rl.sh    # BUDGET_S (default 540) s of pipeline time; ABLATIONS=a,b or ""
#   DEMO_ARGS="--warmup-steps 12 --warmup-lr 1e-4" passes demo options through
# Pretrains the toy policy, evaluates it on held-out toy tasks with the full judge (fresh), runs the four
# stages (training rollouts judged with a lighter judge and a cache of judged sources), evaluates after each
# stage, then the raw_speedup_reward, no_value_pretrain and no_rft ablations while time is left.
# $OUT gets results.json (rewritten after every run: a kill keeps what was done), curves.png, eval.png and
# log.txt; checkpoints and metrics stay in $WORK.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 OUT="${OUT:-$PWD/gpu_out}" WORK="${WORK:-/tmp/gpu_toy_rl}"
mkdir -p "$OUT"
# JAX and the sandbox's torch worker share the GPU: JAX takes a fraction, not 75% up front.
export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.25}"
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, jax, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'jax', jax.__version__, 'triton', triton.__version__)"
  date -u +%Y-%m-%dT%H:%M:%SZ
  # The outer timeout is a guard: the demo keeps its own budget and stops cleanly before it.
  timeout --signal=TERM --kill-after=20 "$(( ${BUDGET_S:-540} + 45 ))" \
    python3 -m scripts.toy_rl_demo --out "$OUT" --work "$WORK" --budget-s "${BUDGET_S:-540}" \
    --ablations "${ABLATIONS-raw_speedup_reward,no_value_pretrain,no_rft}" ${DEMO_ARGS:-}  # ABLATIONS="": none
  echo "demo rc=$?"
} 2>&1 | grep --line-buffered -v "absl\]\[INFO\]\|orbax" | tee "$OUT/log.txt" | tail -n 60
