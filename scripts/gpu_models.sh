#!/usr/bin/env bash
# GPU run of the models package (issue 6): its gpu tests, the training-step benchmark, the decode benchmark.
#
#   OUT=/path/to/outdir bash scripts/gpu_models.sh        # from the repository root, on the GPU machine
#
# Budget: 7 minutes wall in total; every step has its own timeout, so one hang cannot eat the others
# (tests 60 s, train 95 s, decode 250 s, report 10 s). Writes exactly two files: $OUT/models.log (everything)
# and $OUT/models_results.json (copy it to benchmarks/results/ as is).
set -uo pipefail
: "${OUT:?set OUT to an output directory}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
PY=${PYTHON:-python3}   # the GPU image's python3; override for a dry run elsewhere
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
LOG="$OUT/models.log"
PARTS=$(mktemp -d /tmp/models_parts.XXXXXX)
export TORCHINDUCTOR_CACHE_DIR="$PARTS/inductor"   # never the user's cache
: > "$LOG"
exec > >(tee -a "$LOG") 2>&1

SUMMARY=()
step() {  # step NAME SECONDS CMD...: run with a timeout, record the outcome, never abort the script
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "=== [models] $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  local what="ok"; [ "$rc" -ne 0 ] && what="FAILED rc=$rc"; [ "$rc" -eq 124 ] && what="TIMED OUT"
  SUMMARY+=("$name: $what ($((SECONDS - start)) s)")
  echo "$name $what $((SECONDS - start))" >> "$PARTS/steps.txt"
  echo "=== [models] $name: $what ($((SECONDS - start)) s)"
}

echo "=== [models] $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
"$PY" -c "import jax, flax, torch, transformers; print('jax', jax.__version__, jax.devices(), 'flax', flax.__version__,
'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" || true

# Torch and JAX share the GPU inside the test process: no JAX preallocation there; no gemm autotuning
# either (correctness tests: compile time matters, kernel choice does not).
step gpu-tests 60 env XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_FLAGS="--xla_gpu_autotune_level=0" \
  "$PY" -m pytest -q -m gpu tests/models -p no:cacheprovider
step train 95 "$PY" benchmarks/train_step.py --json "$PARTS/train.json" --budget-s 75
step decode 250 "$PY" benchmarks/decode_throughput.py --json "$PARTS/decode.json" --budget-s 235
step report 10 "$PY" - "$PARTS" "$OUT/models_results.json" <<'EOF'
import json, sys
from pathlib import Path
parts, out = Path(sys.argv[1]), Path(sys.argv[2])
def load(name):
    try:
        return json.loads((parts / name).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return {"error": f"{name}: {exc}"}
steps = [line.split() for line in (parts / "steps.txt").read_text().splitlines()] if (parts / "steps.txt").exists() else []
decode, train = load("decode.json"), load("train.json")
env = decode.get("env") or train.get("env")
result = {"area": "models", "env": env, "steps": steps, "train_step": train, "decode_throughput": decode}
out.write_text(json.dumps(result, indent=2, default=str))
print(train.get("summary", {}).get("table", "train: no result"))
print()
print(decode.get("summary", {}).get("table", "decode: no result"))
EOF

echo
echo "=== [models] summary"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
"$PY" - "$OUT/models_results.json" <<'EOF' || true
import json, sys
r = json.load(open(sys.argv[1]))
t = (r.get("train_step") or {}).get("summary") or {}
d = (r.get("decode_throughput") or {}).get("summary") or {}
mfu = t.get("mfu")
print(f"  train: {t.get('tokens_per_s') or 0:.0f} tok/s, MFU {mfu if mfu is None else f'{mfu:.1%}'} (target >= 40%: {t.get('target_40pct_mfu')})")
for b, e in sorted((d.get("batches") or {}).items(), key=lambda kv: int(kv[0])):
    fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
    print(f"  decode batch {b}: ours {fmt(e.get('ours_tokens_per_s'), '.0f')} tok/s, "
          f"HF {fmt(e.get('hf_tokens_per_s'), '.0f')} tok/s ({e.get('hf_mode')}), ratio {fmt(e.get('ratio'), '.2f')}x; "
          f"step {fmt(e.get('decode_step_ms'), '.3f')} ms vs floor {fmt(e.get('floor_weights_kv_ms'), '.3f')} ms")
print(f"  decode target >= 3x at batch 64: {d.get('target_3x_at_64')}")
EOF
