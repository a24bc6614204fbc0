#!/usr/bin/env bash
# Issue #33's measurements at the sizes users train (Qwen2.5 shapes, random weights), from the repository root
# on the GPU machine; each step has its own timeout, so a hang or OOM in one loses nothing of the others:
#   OUT=/path bash scripts/gpu_sizes.sh                        # every step (more than one 10-minute call)
#   OUT=/path SIZES_STEPS="train15_8k rl15" bash scripts/gpu_sizes.sh   # a subset, in the order given
# Steps: train15_8k train15_32k train3_8k train3_32k (train_step MFU), ppo15_8k (actor + critic update),
# rl15 (the RL step at 1.5B, overlapped and serial: GPU idle share), decode15 (1.5B decode at batch
# 64/256/1/16 vs transformers' generate), decode05 (0.5B at 256), engine05 (the agentic rollout workload:
# models.Engine vs the lockstep Sampler, 0.5B), peak (peak_memory: XLA's planned peak at
# 0.5B-7B, 8K/32K, actor and actor + critic, vs models.memory_plan). One JSON per step in $OUT, the log in
# $OUT/sizes.log. PEAK_ARGS adds peak_memory flags (e.g. "--run --models 0.5b,1.5b"), PEAK_LIMIT_S its limit.
# PYTHON overrides python3.
set -uo pipefail
: "${OUT:?set OUT to an output directory}"
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
PY=${PYTHON:-python3}
LOG="$OUT/sizes.log"
exec > >(tee -a "$LOG") 2>&1
step() {  # step NAME SECONDS CMD...: timed, never aborts the script
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "=== [sizes] $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  echo "=== [sizes] $name rc=$rc in $((SECONDS - start)) s"
}
echo "=== [sizes] $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
ALL="rl15 engine05 peak train15_8k train3_8k train15_32k train3_32k ppo15_8k decode15 decode05"
for s in ${SIZES_STEPS:-$ALL}; do
  case "$s" in
    train15_8k) step "$s" 120 $PY -m benchmarks.models.train_step --model 1.5b --seq 8192 --steps 5 --budget-s 90 --json "$OUT/$s.json";;
    train15_32k) step "$s" 120 $PY -m benchmarks.models.train_step --model 1.5b --seq 32768 --steps 3 --budget-s 90 --json "$OUT/$s.json";;
    train3_8k) step "$s" 120 $PY -m benchmarks.models.train_step --model 3b --seq 8192 --steps 5 --budget-s 90 --json "$OUT/$s.json";;
    train3_32k) step "$s" 120 $PY -m benchmarks.models.train_step --model 3b --seq 32768 --steps 3 --budget-s 90 --json "$OUT/$s.json";;
    ppo15_8k) step "$s" 150 $PY -m benchmarks.models.ppo_update --model 1.5b --seqs 8192 --steps 3 --budget-s 120 --json "$OUT/$s.json";;
    # the 1.5B learner (actor + critic, save_attn) plans 70.6 GiB (models.memory_plan): JAX's default 50% OOMs
    rl15) step "$s" 210 $PY -m benchmarks.rl.rl_step --model 1.5b --jax-mem-fraction 0.75 --steps 2 --budget-s 180 --out "$OUT/$s.json";;
    engine05) step "$s" 250 $PY -m benchmarks.models.rollout_engine --tasks 8 --k 8 --budget-s 200 --out "$OUT/$s.json";;
    decode15) step "$s" 230 $PY -m benchmarks.models.decode_throughput --model 1.5b --batches 64,256,1,16 --budget-s 210 --torch-budget-s 130 --json "$OUT/$s.json";;
    decode05) step "$s" 150 $PY -m benchmarks.models.decode_throughput --model 0.5b --batches 256 --budget-s 130 --torch-budget-s 80 --json "$OUT/$s.json";;
    peak) step "$s" "${PEAK_LIMIT_S:-240}" $PY -m benchmarks.models.peak_memory ${PEAK_ARGS:-} --budget-s "$(( ${PEAK_LIMIT_S:-240} - 15 ))" --out "$OUT/$s.json";;
    *) echo "=== [sizes] unknown step $s (known: $ALL)"; exit 2;;
  esac
done
echo "=== [sizes] done $(date -u +%FT%TZ)"
