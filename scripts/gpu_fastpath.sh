#!/usr/bin/env bash
# GPU run of the fast CUDA path (issue 3, item 1): its gpu tests, then benchmarks/sandbox/sandbox_throughput.py.
#
#   OUT=/path/to/outdir bash scripts/gpu_fastpath.sh        # from the repository root, on the GPU machine
#
# Budget: 6 minutes wall in total; every step has its own timeout, so one hang cannot eat the others.
# Writes exactly two files: $OUT/fastpath.log (everything) and $OUT/fastpath_results.json (copy it to
# docs/results/data/ as is; `python -m benchmarks.sandbox.sandbox_throughput report --from FILE --markdown T.md`
# re-renders the table). load_inline is measured on a stated subset of 8 tasks, all 8 built at once (one
# wave of ~50 s); the fast path is measured on all tasks, alone and at the same concurrency.
set -uo pipefail
: "${OUT:?set OUT to an output directory}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}   # the GPU image's python3; override for a dry run elsewhere
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
LOG="$OUT/fastpath.log"
PARTS=$(mktemp -d /tmp/fastpath_parts.XXXXXX)
export KERNELS_ENV_CACHE_DIR="$PARTS/fastpath_cache"   # never the user's cache
: > "$LOG"
exec > >(tee -a "$LOG") 2>&1
TEE_PID=$!

SUMMARY=()
step() {  # step NAME SECONDS CMD...: run with a timeout, record the outcome, never abort the script
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "=== [fastpath] $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  local what="ok"; [ "$rc" -ne 0 ] && what="FAILED rc=$rc"; [ "$rc" -eq 124 ] && what="TIMED OUT"
  SUMMARY+=("$name: $what ($((SECONDS - start)) s)")
  echo "=== [fastpath] $name: $what ($((SECONDS - start)) s)"
}

echo "=== [fastpath] $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
nvcc --version | tail -n 2 || true
"$PY" -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__, torch.cuda.get_device_name(0))" || true

# Overridable for a quick dry run (e.g. FASTPATH_TASKS=01_relu on a machine without a GPU).
TASKS=${FASTPATH_TASKS:-}
LI_TASKS=${FASTPATH_LI_TASKS:-"01_relu,03_gelu,05_softmax,06_layernorm,07_sum,09_rms,10_matmul,12_conv2d"}
E2E_TASKS=${FASTPATH_E2E_TASKS:-"01_relu,05_softmax,06_layernorm,09_rms,10_matmul,11_depthwise"}
TASK_ARGS=(); [ -n "$TASKS" ] && TASK_ARGS=(--tasks "$TASKS")

# FASTPATH_STEPS: a comma list to run a subset (e.g. "spread,e2e" to re-measure timing only); report always runs.
STEPS=",${FASTPATH_STEPS:-gpu-tests,compile,spread,e2e},"
want() { [[ "$STEPS" == *",$1,"* ]]; }
want gpu-tests && step gpu-tests 75 "$PY" -m pytest -q -m gpu tests/fastpath -p no:cacheprovider
want compile && step compile 130 "$PY" -m benchmarks.sandbox.sandbox_throughput compile --out "$PARTS/compile.json" "${TASK_ARGS[@]}" \
  --concurrency 8 --load-inline-tasks "$LI_TASKS" --deadline-s 60 --build-timeout-s 110
want spread && step spread 40 "$PY" -m benchmarks.sandbox.sandbox_throughput spread --out "$PARTS/spread.json" "${TASK_ARGS[@]}" \
  --iters 100
E2E_DEADLINE=${FASTPATH_E2E_DEADLINE:-55}  # warm-ups (one baseline per task) count against it too
want e2e && step e2e $((E2E_DEADLINE + 20)) "$PY" -m benchmarks.sandbox.sandbox_throughput e2e --out "$PARTS/e2e.json" --deadline-s "$E2E_DEADLINE" \
  --only "$E2E_TASKS" --baselines eager --concurrency "${FASTPATH_E2E_CONCURRENCY:-1}"
step report 25 "$PY" -m benchmarks.sandbox.sandbox_throughput report --parts "$PARTS" \
  --out "$OUT/fastpath_results.json" --markdown "$PARTS/table.md"

echo
echo "=== [fastpath] summary"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
[ -f "$PARTS/table.md" ] && cat "$PARTS/table.md"
[ -f "$OUT/fastpath_results.json" ] && echo "results: $OUT/fastpath_results.json"
rm -rf "$PARTS"
# Let tee flush the log before the script returns.
exec 1>&- 2>&-
wait "$TEE_PID" 2>/dev/null || true
