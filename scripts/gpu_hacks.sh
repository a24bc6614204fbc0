#!/usr/bin/env bash
# GPU run of the reward-hack defences (area: hacks), through the real sandbox. From the repo root, with $OUT:
#   OUT=/path/to/out bash scripts/gpu_hacks.sh          (PYTHON=... to choose the interpreter)
# Steps (each under `timeout`, so one hang cannot eat the 3-minute budget):
#   1. versions;
#   2. the guard's gpu unit tests (tests/guard -m gpu), in the background;
#   3. the GPU red-team corpus (tests/redteam -m gpu): every attack must be rejected for its stated check and
#      every legitimate solution judged correct, each through SandboxClient(SandboxConfig(device="cuda"));
#      plus the speed-review test (a >10x speedup flagged, cold-L2 timing);
#   4. a summary table (expected vs actual per case), printed last.
# Writes exactly two files: $OUT/hacks.log (everything printed) and $OUT/hacks_results.json (per case:
# expected and actual verdict, check, evidence, families, census, timings; plus the pytest outcomes).
# No bare `wait` and no process substitution: background steps are waited on by pid.
set -uo pipefail
: "${OUT:?set OUT to an output directory}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
PY="${PYTHON:-python3}"
LOG="$OUT/hacks.log"
RESULTS="$OUT/hacks_results.json"
WORK=$(mktemp -d /tmp/gpu_hacks.XXXXXX)
export HACKS_RESULTS_JSON="$WORK/cases.json"
: >"$LOG"
start=$SECONDS

say() { echo "$@" | tee -a "$LOG"; }

say "== versions"
timeout 60 "$PY" - <<'PYEOF' 2>&1 | grep -v '^USDT:' | tee -a "$LOG"
import sys
import torch
print("python", sys.version.split()[0], "| torch", torch.__version__, "cuda", torch.version.cuda)
for name in ("triton", "cupy"):
    try:
        print(name, __import__(name).__version__)
    except Exception as exc:  # noqa: BLE001
        print(name, "unavailable:", exc)
if torch.cuda.is_available():
    print("gpu", torch.cuda.get_device_name(0), "cc", torch.cuda.get_device_capability(0))
else:
    print("gpu: none visible (gpu tests will be skipped)")
PYEOF
command -v nvcc >/dev/null && nvcc --version | tail -1 | tee -a "$LOG"

# 2. Guard unit tests on the GPU, in the background (light; they share the GPU with the red-team run).
say "== guard-gpu-unit (background, limit 100s)"
timeout --kill-after=5 100 "$PY" -m pytest -q -m gpu tests/guard -p no:cacheprovider -rfE \
  --junitxml="$WORK/unit.xml" >"$WORK/unit.log" 2>&1 &
UNIT_PID=$!

# 3. The red-team corpus through the real sandbox (compile workers build the load_inline extension first).
say "== redteam-gpu (limit 150s)"
timeout --kill-after=5 150 "$PY" -m pytest -q -m gpu tests/redteam -p no:cacheprovider -rfE \
  --junitxml="$WORK/redteam.xml" 2>&1 | grep -v '^USDT:' | tee -a "$LOG"
redteam_rc=${PIPESTATUS[0]}
say "== redteam-gpu: rc=$redteam_rc after $((SECONDS - start))s"

wait "$UNIT_PID"
unit_rc=$?
grep -v '^USDT:' "$WORK/unit.log" | tee -a "$LOG"
say "== guard-gpu-unit: rc=$unit_rc after $((SECONDS - start))s"

# 4. Summary: expected vs actual per case, and the pytest outcomes, into $OUT/hacks_results.json.
say "== summary"
timeout 30 "$PY" - "$WORK" "$RESULTS" "$unit_rc" "$redteam_rc" "$((SECONDS - start))" <<'PYEOF' 2>&1 | tee -a "$LOG"
import json, os, sys, time
import xml.etree.ElementTree as ET

work, out, unit_rc, redteam_rc, wall = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]


def junit(name):
    rows = []
    try:
        for case in ET.parse(os.path.join(work, name)).getroot().iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = child.tag + ": " + (child.get("message") or "")[:300]
                elif child.tag == "skipped":
                    outcome = "skipped: " + (child.get("message") or "")[:120]
            rows.append({"test": case.get("name"), "outcome": outcome, "time_s": float(case.get("time") or 0)})
    except (OSError, ET.ParseError) as exc:
        rows.append({"test": name, "outcome": f"missing: {exc}"})
    return rows


doc = {"cases": [], "device": None, "torch": None, "total": 0}
path = os.path.join(work, "cases.json")
if os.path.exists(path):
    doc = json.load(open(path))
doc.update(
    area="hacks",
    date=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    wall_s=wall,
    unit_rc=unit_rc,
    redteam_rc=redteam_rc,
    unit_tests=junit("unit.xml"),
    redteam_tests=junit("redteam.xml"),
)
json.dump(doc, open(out, "w"), indent=1, default=str)
cases = doc["cases"]
print(f"{'case':48s} {'policy':11s} {'expected':28s} {'actual':28s} ok")
for c in cases:
    print(f"{c['case']:48s} {c['policy']:11s} {c['expect']:28s} {str(c['actual']):28s} {'yes' if c['ok'] else 'NO'}")
bad = [c for c in cases if not c["ok"]]
for c in bad:
    print(f"  UNEXPECTED {c['case']}: {c['status']} {c['check']}: {str(c['error'])[:200]}")
for group in ("unit_tests", "redteam_tests"):
    rows = doc[group]
    passed = sum(r["outcome"] == "passed" for r in rows)
    skipped = sum(r["outcome"].startswith("skipped") for r in rows)
    print(f"{group}: {passed} passed, {skipped} skipped, {len(rows) - passed - skipped} failed")
print(f"red-team on {doc.get('device')} (torch {doc.get('torch')}): {len(cases) - len(bad)}/{len(cases)} as "
      f"expected ({doc.get('total')} scheduled); wall {wall} s; results in {out}")
PYEOF
rm -rf "$WORK"
status=0
[ "$unit_rc" -eq 0 ] || status=1
[ "$redteam_rc" -eq 0 ] || status=1
say "hacks: overall status $status (0 = all gpu checks passed) in $((SECONDS - start))s"
exit $status
