#!/usr/bin/env bash
# GPU run of the reward-hack defences (area: hacks). From the repo root on the GPU machine, with $OUT set:
#   OUT=/path/to/out bash scripts/gpu_hacks.sh
# Runs the gpu-marked guard unit tests and the GPU red-team corpus (every attack must be rejected for its
# stated reason, every legitimate solution accepted). Wall budget: 3 minutes. Writes $OUT/hacks.log and
# $OUT/hacks_results.json (one row per GPU red-team case: expected check, verdict, census, families).
set -uo pipefail
: "${OUT:?set OUT to an output directory}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export HACKS_RESULTS_JSON="$OUT/hacks_results.json"
unset TRITON_INTERPRET
PY="${PYTHON:-python3}"
LOG="$OUT/hacks.log"
: >"$LOG"
status=0

step() {  # step NAME TIMEOUT_S CMD...: run one step, log it, never let it hang the budget
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s)" | tee -a "$LOG"
  local start=$SECONDS
  timeout --kill-after=5 "$limit" "$@" 2>&1 | grep -v '^USDT:' | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "== $name: rc=$rc in $((SECONDS - start))s" | tee -a "$LOG"
  [ "$rc" -eq 0 ] || status=1
  return 0
}

step versions 20 "$PY" -c "
import sys, torch, triton, cupy
print('python', sys.version.split()[0], '| torch', torch.__version__, 'cuda', torch.version.cuda,
      '| triton', triton.__version__, '| cupy', cupy.__version__)
print('gpu', torch.cuda.get_device_name(0), 'cc', torch.cuda.get_device_capability(0))
"
command -v nvcc >/dev/null && nvcc --version | tail -1 | tee -a "$LOG"

# The shared load_inline extension takes ~50 s to build: start it now, next to the unit tests.
BUILD_LOG=$(mktemp)
timeout 150 "$PY" -c "
import importlib.util, time
t = time.time()
spec = importlib.util.spec_from_file_location('inline_ext', 'tests/redteam/solutions/_inline_ext.py')
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); mod.build()
print(f'load_inline extension built in {time.time() - t:.0f} s')
" >"$BUILD_LOG" 2>&1 &
BUILD_PID=$!

step guard-gpu-unit 40 "$PY" -m pytest -q -m gpu tests/guard -p no:cacheprovider -rfE
wait "$BUILD_PID"
echo "== prebuild: $(tail -3 "$BUILD_LOG")" | tee -a "$LOG"
rm -f "$BUILD_LOG"
step redteam-gpu 115 "$PY" -m pytest -q -m gpu tests/redteam -p no:cacheprovider -rfE

echo "== summary" | tee -a "$LOG"
"$PY" - <<'PY' 2>&1 | tee -a "$LOG"
import json, os
path = os.environ["HACKS_RESULTS_JSON"]
if not os.path.exists(path):
    print("no red-team results were written (the run did not reach the verdict fixture)")
else:
    doc = json.load(open(path))
    cases = doc["cases"]
    bad = [c for c in cases if not c["ok"]]
    print(f"red-team on {doc['device']} (torch {doc['torch']}): {len(cases) - len(bad)}/{len(cases)} as expected"
          f" ({doc.get('total', len(cases))} cases scheduled)")
    for c in bad:
        print(f"  UNEXPECTED {c['case']}: expected {c['expect']}, got {c['status']} {c['check']}: {c['message'][:160]}")
PY
grep -E "^(FAILED|ERROR)|passed|failed" "$LOG" | tail -8
echo "hacks: overall status $status (0 = all gpu checks passed)"
exit $status
