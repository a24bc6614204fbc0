#!/usr/bin/env bash
# GPU run of the agent area (research/agent): gpu tests, then the agent-loop benchmark.
# Run from the repo root on the GPU machine with $OUT set:   OUT=/some/dir bash scripts/gpu_agent.sh
# Wall budget: about 10 minutes. Writes $OUT/agent.log and $OUT/agent_loop_results.json.
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
PY=${PYTHON:-python3}
LOG="$OUT/agent.log"
: > "$LOG"

step() {  # step NAME SECONDS CMD...: one step never hides or blocks the others
  local name=$1 limit=$2; shift 2
  echo "=== [$name] (timeout ${limit}s) $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  echo "=== [$name] rc=$? in $((SECONDS - t0))s" | tee -a "$LOG"
}

step gpu-tests 240 "$PY" -m pytest -q -m gpu tests/agent -p no:cacheprovider
step benchmark 540 "$PY" -m benchmarks.rl.agent_loop --out "$OUT/agent_loop_results.json" \
  --episodes "${AGENT_EPISODES:-32}" --turns "${AGENT_TURNS:-8}"
