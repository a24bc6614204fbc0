#!/usr/bin/env bash
# Every `gpu`-marked test of the suite, one group per test folder, each under its own timeout (one hang
# cannot eat the others). Run through scripts/gpu_run.sh (area "tests") or alone, from the repository root
# with $OUT set. About 10 minutes in all (GPU_TESTS_GROUPS picks groups, e.g. "sandbox,redteam"). A group
# whose pytest finished but whose process did not exit (JAX teardown) is read from its junit file.
# Writes exactly two files: $OUT/tests.log and $OUT/tests_results.json (per group: rc, counts, failures).
set -uo pipefail
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
PY=${PYTHON:-python3}
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/gpu_tests.XXXXXX)
exec > >(tee "$OUT/tests.log") 2>&1
# group:timeout_s:paths (most important first)
GROUPS_ALL="sandbox:${GPU_TESTS_SANDBOX_S:-220}:tests/sandbox redteam:${GPU_TESTS_REDTEAM_S:-160}:tests/redteam guard:50:tests/guard tools:240:tests/tools
fastpath:60:tests/fastpath models:120:tests/models data:40:tests/data"
WANT=",${GPU_TESTS_GROUPS:-sandbox,redteam,guard,tools,fastpath,models,data},"
for spec in $GROUPS_ALL; do
  IFS=: read -r name limit paths <<<"$spec"
  [[ $WANT == *",$name,"* ]] || continue
  echo "=== [$name] (timeout ${limit}s) pytest -m 'gpu and not slow' $paths"
  start=$SECONDS
  timeout --kill-after=10 "$limit" "$PY" -m pytest -q -m "gpu and not slow" $paths -p no:cacheprovider \
    --junitxml="$WORK/$name.xml" -rfE 2>&1 | grep -v "^REPORT " | tail -n 40
  echo "=== [$name] rc=${PIPESTATUS[0]} in $((SECONDS - start))s"
done
"$PY" - "$WORK" "$OUT/tests_results.json" <<'PYEOF'
import json, sys
import xml.etree.ElementTree as ET
from pathlib import Path

work, out = Path(sys.argv[1]), Path(sys.argv[2])
groups = {}
for xml in sorted(work.glob("*.xml")):
    counts, failures = {"passed": 0, "failed": 0, "skipped": 0}, []
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            counts["failed"] += 1
            failures.append(f"{case.get('classname')}::{case.get('name')}")
        elif "skipped" in kinds:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    groups[xml.stem] = {**counts, "failures": failures}
out.write_text(json.dumps(groups, indent=2))
print(json.dumps({k: {c: v[c] for c in ("passed", "failed", "skipped")} for k, v in groups.items()}))
PYEOF
