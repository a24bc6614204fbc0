#!/usr/bin/env bash
# Runs per-area GPU scripts (scripts/gpu_<area>.sh) on a CUDA machine, one lane per GPU, lanes in parallel:
#   OUT=/tmp/out bash scripts/gpu_run.sh "models,data" "fastpath,sandbox"   # lane 0 on GPU 0, lane 1 on GPU 1
# Installs the Hydra wheels from .whl (scripts/prepare_wheels.sh) when the image lacks Hydra.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
if ! python3 -c "import hydra" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
python3 -c "import sys, torch, jax; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'jax', jax.__version__)"
lane=0
for areas in "$@"; do
  (
    export CUDA_VISIBLE_DEVICES=$lane
    for area in ${areas//,/ }; do
      start=$(date +%s)
      bash "scripts/gpu_${area}.sh" > "/tmp/gpu_${area}.stdout" 2>&1
      rc=$?
      { echo "== [gpu $lane] $area rc=$rc in $(( $(date +%s) - start ))s; last lines:"
        tail -n 25 "/tmp/gpu_${area}.stdout"; } > "/tmp/gpu_${area}.tail"
      flock /tmp/gpu_run.lock cat "/tmp/gpu_${area}.tail"
    done
  ) &
  lane=$((lane + 1))
done
wait
# The transport returns at most 8 files: keep each area's results JSON, bundle every log into one archive.
if ls "$OUT"/*.log >/dev/null 2>&1; then
  tar -czf "$OUT/logs.tar.gz" -C "$OUT" $(cd "$OUT" && ls *.log) && rm -f "$OUT"/*.log
fi
