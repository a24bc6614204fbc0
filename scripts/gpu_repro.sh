#!/usr/bin/env bash
# GPU run of the reproduction workflow (research/evaluation, docs/reproducing.md) on real timings:
#  1. a solution set made from examples/solutions (claims are placeholders: 1.5x vs eager, 1.2x vs compile)
#     judged by `experiments.solutions` against a checkout of examples/problems laid out as level1/ (GPU
#     sandbox, cuda_agent protocol): claims vs measured with comparable timings, per-source Table 1;
#  2. the degenerate-task audit of that checkout (notebook) and Table 1 with its audited subset (notebook);
#  3. the figures command on the judged run;
#  4. the audit of the KernelBench checkout (levels 1-3) on the GPU, for the audited Table 1 of real runs.
# Run from the repo root on the GPU machine:   OUT=/some/dir bash scripts/gpu_repro.sh
# Wall budget: about 10 minutes. Writes $OUT/repro.log, $OUT/example_set/ (results.jsonl, claims.json,
# table1.json, figures/, report/), $OUT/example_audit/ and $OUT/kernelbench_audit.json.
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
PY=${PYTHON:-python3}
LOG="$OUT/repro.log"
: > "$LOG"
KB=${KERNELBENCH_DIR:-$(cd .. && pwd)/shared/kernelbench}

step() {  # step NAME SECONDS CMD...: one step never hides or blocks the others
  local name=$1 limit=$2; shift 2
  echo "=== [$name] (timeout ${limit}s) $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  echo "=== [$name] rc=$? in $((SECONDS - t0))s" | tee -a "$LOG"
}

# The example checkout (links, nothing copied) and the solution set (single-file solutions only).
mkdir -p "$OUT/example_kb/level1"
for f in examples/problems/*.py; do ln -sf "$PWD/$f" "$OUT/example_kb/level1/$(basename "$f")"; done
"$PY" - "$OUT/example_set.jsonl" <<'PYEOF'
import json, sys
from pathlib import Path
rows = []
for f in sorted(Path("examples/solutions").glob("*.py")):
    problem, _, variant = f.stem.partition("__")
    rows.append({"id": f.stem, "level": 1, "problem_name": problem, "code": f.read_text(),
                 "source": variant or "default", "eager": 1.5, "compile": 1.2})
Path(sys.argv[1]).write_text("".join(json.dumps(r) + "\n" for r in rows))
print(f"{len(rows)} records")
PYEOF

step solutions 300 "$PY" -m experiments.solutions input="$OUT/example_set.jsonl" \
  kernelbench_dir="$OUT/example_kb" out_dir="$OUT/example_set" hydra.run.dir="$OUT/example_set" \
  sandbox=gpu judge=cuda_agent progress=false \
  mapping.claimed_speedup_eager=eager mapping.claimed_speedup_compile=compile mapping.source=source \
  mapping.id=id mapping.problem_id=null
step audit-notebook 120 "$PY" -m notebooks.task_audit "$OUT/example_kb" "$OUT/example_audit" --device=cuda
step table1-notebook 60 "$PY" -m notebooks.table1_report "$OUT/example_set" "$OUT/example_audit/audit.json"
step claims-notebook 60 "$PY" -m notebooks.solution_claims "$OUT/example_set"
step figures 60 "$PY" -m experiments.figures run_dir="$OUT/example_set"
if [ -d "$KB/level1" ]; then
  step kernelbench-audit 300 sh -c "'$PY' -m kernels_env audit --problems '$KB' --json --device cuda \
    > '$OUT/kernelbench_audit.json'"
else
  echo "=== [kernelbench-audit] skipped: no KernelBench checkout at $KB (set KERNELBENCH_DIR)" | tee -a "$LOG"
fi
