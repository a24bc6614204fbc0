#!/usr/bin/env bash
# GPU run of the models package (issue 6). Two modes, from the repository root on the GPU machine:
#
#   OUT=/path/to/outdir bash scripts/gpu_models.sh                            # full: gpu tests, train, decode
#   MODELS_MODE=decode_sweep OUT=/path/to/outdir bash scripts/gpu_models.sh   # only the decode sweep
#   (MODELS_SWEEP_TESTS=1 adds the gpu-marked tests before the sweep)
#
# full (<= 5 min; limits 75 + 45 + 170 + 10 s): the gpu-marked tests, the training-step benchmark, and the
#   decode benchmark of the default DecodeConfig at batch 64/16/1 against transformers.
# decode_sweep (<= 3.5 min; limit 200 s): the decode benchmark at batch 64 and 1 for every configuration of
#   benchmarks/models/decode_throughput.py CONFIGS (default and one-knob ablations), kernels per step, a kernel-time
#   profile of the default at batch 64, and transformers once per batch.
# Every step has its own timeout, so one hang cannot eat the others. Writes exactly two files: $OUT/models.log
# (everything) and $OUT/models_results.json (copy it to docs/results/data/ as is). PYTHON overrides python3
# (e.g. a CPU dry run: PYTHON=.venv/bin/python MODELS_TINY=1 ...).
set -uo pipefail
: "${OUT:?set OUT to an output directory}"
MODE=${MODELS_MODE:-full}
case "$MODE" in full|decode_sweep) ;; *) echo "MODELS_MODE must be full or decode_sweep, got $MODE" >&2; exit 2;; esac
TINY=()
[ -n "${MODELS_TINY:-}" ] && TINY=(--tiny)
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

echo "=== [models] mode $MODE, $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true

if [ "$MODE" = full ]; then
  "$PY" -c "import jax, flax, torch, transformers; print('jax', jax.__version__, jax.devices(), 'flax',
flax.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" || true
  # Torch and JAX share the GPU inside the test process: no JAX preallocation there; no gemm autotuning
  # either (correctness tests: compile time matters, kernel choice does not).
  step gpu-tests 75 env XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_FLAGS="--xla_gpu_autotune_level=0" \
    "$PY" -m pytest -q -m gpu tests/models -p no:cacheprovider
  step train 45 "$PY" -m benchmarks.models.train_step "${TINY[@]}" --json "$PARTS/train.json" --budget-s 35
  step decode 170 "$PY" -m benchmarks.models.decode_throughput "${TINY[@]}" --json "$PARTS/decode.json" --budget-s 160
else
  if [ -n "${MODELS_SWEEP_TESTS:-}" ]; then  # the gpu tests too, before the sweep (another ~75 s)
    step gpu-tests 75 env XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_FLAGS="--xla_gpu_autotune_level=0" \
      "$PY" -m pytest -q -m gpu tests/models -p no:cacheprovider
  fi
  step decode-sweep 200 "$PY" -m benchmarks.models.decode_throughput "${TINY[@]}" --sweep --json "$PARTS/decode.json" \
    --budget-s 192
fi

step report 10 "$PY" - "$PARTS" "$OUT/models_results.json" "$MODE" <<'EOF'
import json, sys
from pathlib import Path
parts, out, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
def load(name):
    try:
        return json.loads((parts / name).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return {"error": f"{name}: {exc}"}
steps = [line.split() for line in (parts / "steps.txt").read_text().splitlines()] if (parts / "steps.txt").exists() else []
decode = load("decode.json")
train = load("train.json") if mode == "full" else {"skipped": "decode_sweep mode"}
env = decode.get("env") or train.get("env")
result = {"area": "models", "mode": mode, "env": env, "steps": steps, "train_step": train, "decode_throughput": decode}
out.write_text(json.dumps(result, indent=2, default=str))
if mode == "full":
    print(train.get("summary", {}).get("table", "train: no result"))
    print()
print(decode.get("summary", {}).get("table", "decode: no result"))
EOF

echo
echo "=== [models] summary ($MODE)"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
"$PY" - "$OUT/models_results.json" <<'EOF' || true
import json, sys
r = json.load(open(sys.argv[1]))
fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
t = (r.get("train_step") or {}).get("summary")
if t is not None:
    mfu = t.get("mfu")
    print(f"  train: {t.get('tokens_per_s') or 0:.0f} tok/s, MFU {fmt(mfu, '.1%')} (target >= 40%: {t.get('target_40pct_mfu')})")
d = (r.get("decode_throughput") or {}).get("summary") or {}
for name, per in (d.get("configs") or {}).items():
    for b, e in sorted(per.items(), key=lambda kv: -int(kv[0])):
        print(f"  decode {name} batch {b}: ours {fmt(e.get('ours_tokens_per_s'), '.0f')} tok/s, "
              f"HF {fmt(e.get('hf_tokens_per_s'), '.0f')} tok/s ({e.get('hf_mode')}), ratio {fmt(e.get('ratio'), '.2f')}x; "
              f"step {fmt(e.get('decode_step_ms'), '.3f')} ms vs floor {fmt(e.get('floor_weights_kv_ms'), '.3f')} ms; "
              f"{fmt(e.get('kernels_per_step'), '.0f')} kernels/step; |dlogp| {fmt(e.get('logprob_max_abs_diff'), '.3g')}; "
              f"{e.get('status')}")
print(f"  best configuration per batch: {d.get('best_config')}")
print(f"  decode target >= 3x at batch 64 (default configuration): {d.get('target_3x_at_64')}")
EOF
