#!/usr/bin/env bash
# GPU run of benchmarks/sandbox/guard_overhead.py (what one guarded forward costs, by defence): about 1 minute.
# Writes $OUT/guard.log and $OUT/guard_overhead.json.
set -uo pipefail
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
timeout 150 "$PY" -m benchmarks.sandbox.guard_overhead --out "$OUT/guard_overhead.json" \
  --tasks "${GUARD_TASKS:-01_relu,05_softmax,10_matmul}" > "$OUT/guard.log" 2>&1
rc=$?
grep -v "^USDT\|profiler_st" "$OUT/guard.log" | tail -n 20
echo "guard_overhead exit code: $rc"
