#!/usr/bin/env bash
# GPU run of the data area (research/data): gpu tests, then the GPU runtime-window benchmark.
# Run from the repo root on the GPU machine with $OUT set:   OUT=/some/dir bash scripts/gpu_data.sh
# Wall budget: 4 minutes. Writes exactly two files: $OUT/data.log and $OUT/data_results.json.
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
PY=${PYTHON:-python3}
LOG="$OUT/data.log"
RESULTS="$OUT/data_results.json"
WORK=$(mktemp -d /tmp/data_gpu.XXXXXX)
NCPU=$(nproc)
WORKERS=$(( NCPU > 2 ? NCPU - 2 : 1 ))
: > "$LOG"

step() {  # step NAME SECONDS CMD...: one step never hides or blocks the others
  local name=$1 limit=$2; shift 2
  echo "=== [$name] (timeout ${limit}s) $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=$?
  echo "=== [$name] rc=$rc in $((SECONDS - t0))s" | tee -a "$LOG"
  STATUS+=("$name rc=$rc $((SECONDS - t0))s")
}
STATUS=()

step versions 20 bash -c "$PY -c 'import sys, torch; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, \"available\", torch.cuda.is_available()); print(torch.cuda.get_device_name() if torch.cuda.is_available() else \"no GPU\")'; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true; $PY -c 'import kernels_env.client' 2>&1 | tail -1 || true"
step gpu-tests 50 "$PY" -m pytest -q -m gpu tests/data/test_gpu.py -p no:cacheprovider
step gpu-benchmark 165 "$PY" -m benchmarks.data.synthesis gpu --num-tasks "${DATA_GPU_TASKS:-220}" --workers "$WORKERS" \
  --out-dir "$WORK/synth" --total-budget-s 150 --results "$RESULTS"

rm -rf "$WORK"
{
  echo "=== data summary"
  printf '%s\n' "${STATUS[@]}"
  "$PY" - "$RESULTS" <<'PYEOF' || echo "no results file"
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("steps", {})
syn = s.get("synthesize", {})
print(f"synthesized {syn.get('num_tasks')} tasks from {syn.get('candidates')} candidates in {syn.get('wall_s')} s")
for name in ("sandbox_timer",):
    t = s.get(name)
    if t and "timed" in t:
        print(f"{name}: {t['timed']} tasks timed, {t['ok']} ok, {t['in_window_1_100ms']} in [1,100] ms; "
              f"{t['tasks_per_hour_per_gpu']} tasks/hour/GPU; measured/estimated {t['measured_over_est']}")
    elif t:
        print(f"{name}: {t}")
print("gpu:", r.get("environment", {}).get("gpu"))
PYEOF
} 2>&1 | tee -a "$LOG"
