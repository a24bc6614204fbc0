#!/usr/bin/env bash
# GPU run of the sandbox core (issue 3): its gpu tests, then `python -m kernels_env batch` on the examples.
# Run from the repository root on the GPU machine with $OUT set; about 4 minutes of wall time.
# Writes exactly two files: $OUT/sandbox.log (everything printed) and $OUT/sandbox_results.json.
set -uo pipefail
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/gpu_sandbox.XXXXXX)
LOG="$OUT/sandbox.log"
exec > >(tee "$LOG") 2>&1
export SANDBOX_GPU_CACHE="$WORK/cache" SANDBOX_GPU_REPORT="$WORK/report.jsonl"
start=$(date +%s)

echo "== environment"
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || echo "nvidia-smi failed"
timeout 60 "$PY" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__,
'cuda', torch.version.cuda, 'triton', triton.__version__, 'gpu', torch.cuda.get_device_name(0))" \
  || echo "torch/triton import failed"

echo "== gpu tests (tests/sandbox/test_gpu.py, not slow)"
timeout 175 "$PY" -m pytest -q -m "gpu and not slow" tests/sandbox/test_gpu.py -p no:cacheprovider \
  --junitxml="$WORK/junit.xml" -rA -s 2>&1 | grep -v "^REPORT " | tail -n 80
tests_rc=$?
echo "pytest exit code: $tests_rc"

echo "== batch on examples (baselines eager + compile, shared cache with the tests)"
timeout 55 "$PY" -m kernels_env batch --problems examples/problems --solutions examples/solutions \
  --out "$WORK/batch/results.jsonl" --device cuda --cache-dir "$WORK/cache" --baselines eager,compile \
  --no-progress --no-plot
batch_rc=$?
echo "batch exit code: $batch_rc"

echo "== summary"
timeout 30 "$PY" - "$WORK" "$OUT/sandbox_results.json" "$tests_rc" "$batch_rc" "$start" <<'PYEOF'
import json, sys, time
import xml.etree.ElementTree as ET
from pathlib import Path

work, out, tests_rc, batch_rc, start = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
tests = []
try:
    for case in ET.parse(work / "junit.xml").getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = child.tag
            elif child.tag == "skipped":
                outcome = "skipped: " + (child.get("message") or "")[:200]
        tests.append({"test": case.get("name"), "outcome": outcome, "time_s": float(case.get("time") or 0)})
except (OSError, ET.ParseError) as exc:
    tests.append({"test": "junit.xml", "outcome": f"missing: {exc}"})
report = []
if (work / "report.jsonl").exists():
    report = [json.loads(line) for line in (work / "report.jsonl").read_text().splitlines() if line.strip()]
batch = []
if (work / "batch/results.jsonl").exists():
    for line in (work / "batch/results.jsonl").read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        cand = ((r.get("timings") or {}).get("candidate") or {})
        batch.append({"solution": r["solution"], "status": r["status"], "reward": r["reward"], "error": r["error"],
                      "speedups": r["speedups"], "candidate_median_ms": cand.get("median_ms"),
                      "candidate_iqr_ms": cand.get("iqr_ms"), "durations_s": r["durations_s"]})
summary = None
if (work / "batch/results.summary.json").exists():
    summary = json.loads((work / "batch/results.summary.json").read_text())
env = next((r for r in report if r.get("test") == "environment"), {})
result = {"area": "sandbox", "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "wall_s": round(time.time() - start, 1),
          "environment": env, "pytest_exit_code": tests_rc, "tests": tests, "report": report,
          "batch_exit_code": batch_rc, "batch_summary": summary, "batch_results": batch}
Path(out).write_text(json.dumps(result, indent=1, default=str))
passed = sum(t["outcome"] == "passed" for t in tests)
print(f"GPU: {env.get('gpu')} driver {env.get('driver')} torch {env.get('torch')} triton {env.get('triton')}")
print(f"gpu tests: {passed}/{len(tests)} passed (pytest exit {tests_rc})")
for t in tests:
    if t["outcome"] != "passed":
        print(f"  {t['test']}: {t['outcome']}")
for r in report:
    if r.get("test") in ("timing_spread", "load_inline", "baselines"):
        print("  " + json.dumps(r))
if summary:
    print(f"batch: {summary['status_counts']}  fast_p(eager) {summary['fast_p'].get('eager')}  "
          f"geomean vs eager {summary['geomean_speedup'].get('eager')}  vs compile {summary['geomean_speedup'].get('compile')}")
else:
    print(f"batch: no summary (exit {batch_rc})")
print(f"wall time {result['wall_s']} s; results in {out}")
PYEOF
rm -rf "$WORK"
