#!/usr/bin/env bash
# GPU run of issue 4 (profiler/diagnostics tools), from the repo root with $OUT set. Wall budget: 5 minutes
# (PROFILER_BUDGET_S, default 285 s; every step's `timeout` is cut to what is left).
#   1. capture raw ncu / compute-sanitizer outputs (+ versions) of the fixture kernels, check the parsers on
#      them; -> $OUT/profiler_fixtures.tar.gz (`real/`: the lead unpacks it into tests/tools/fixtures/) when
#      PROFILER_STEPS=capture or when tests/tools/fixtures/real/ is not checked in yet
#   2. gpu tests of the tools, through the real sandbox client (bottleneck labels, sanitizer catches, Triton)
#   3. benchmarks/sandbox/tool_latency.py (time per profile / compile call through the client)
# PROFILER_STEPS=capture stops after step 1. Writes at most $OUT/profiler.log, $OUT/profiler_results.json and
# $OUT/profiler_fixtures.tar.gz. Each step is bounded by `timeout` and independent of the others.
set -uo pipefail
export PYTHONUNBUFFERED=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
PY=${PYTHON:-python3}
STEPS=${PROFILER_STEPS:-all}
DEADLINE=$((SECONDS + ${PROFILER_BUDGET_S:-285}))
LOG="$OUT/profiler.log"
WORK=$(mktemp -d)
FIX="$WORK/real"
P=tests/tools/fixtures/problems
mkdir -p "$FIX"
exec > >(tee -a "$LOG") 2>&1
declare -A RC
step() { echo; echo "=== $1 ($(date +%T), $((DEADLINE - SECONDS)) s left)"; }
# budget WANT [RESERVE]: WANT seconds, or what is left before the deadline minus RESERVE (at least 5)
budget() { local want=$1 left=$((DEADLINE - SECONDS - ${2:-0})); ((left < want)) && want=$left; ((want < 5)) && want=5; echo "$want"; }

step "versions"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
  timeout 60 $PY -c "import torch, triton, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'cupy', cupy.__version__)"
  timeout 30 $PY -c "from kernels_env.tools._ncu import find_ncu; from kernels_env.tools._sanitizer import find_sanitizer; from kernels_env.tools._sass import find_disassembler; print('ncu', find_ncu()); print('sanitizer', find_sanitizer()); print('disassembler', find_disassembler())"
} 2>&1 | tee "$FIX/versions.txt"
NCU=$(timeout 30 $PY -c "from kernels_env.tools._ncu import find_ncu; print(find_ncu() or 'ncu')" 2>/dev/null || echo ncu)
CS=$(timeout 30 $PY -c "from kernels_env.tools._sanitizer import find_sanitizer; print(find_sanitizer() or 'compute-sanitizer')" 2>/dev/null || echo compute-sanitizer)
{ timeout 30 "$NCU" --version; timeout 30 "$CS" --version; nvcc --version | tail -2; } 2>&1 | tee -a "$FIX/versions.txt"

step "1a. sanitizer captures (background, in parallel with ncu)"
SAN_T=$(budget 90 170)
san() {  # tool solution name [extra args...]
  local tool=$1 sol=$2 name=$3; shift 3
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "$SAN_T" "$CS" --tool "$tool" --print-limit 20 --target-processes all \
    --show-backtrace no --log-file "$FIX/sanitizer_${name}.log" "$@" \
    $PY -m kernels_env.tools._target --reference $P/ref_small.py --solution "$P/$sol" --which candidate \
    --mode once --result "$FIX/target_${name}.json" > "$FIX/sanitizer_${name}.stdout" 2>&1
  echo "$name rc=$?" >> "$FIX/sanitizer_rcs.txt"
}
SAN_PIDS=()
san memcheck sol_oob.py memcheck_oob & SAN_PIDS+=($!)
san racecheck sol_race.py racecheck_race & SAN_PIDS+=($!)
san initcheck sol_uninit.py initcheck_uninit & SAN_PIDS+=($!)
san memcheck sol_clean.py memcheck_clean & SAN_PIDS+=($!)
san racecheck sol_clean.py racecheck_clean & SAN_PIDS+=($!)
san initcheck sol_clean.py initcheck_clean & SAN_PIDS+=($!)
san memcheck sol_oob.py memcheck_oob_kns --kernel-name kns=scale_oob & SAN_PIDS+=($!)

step "1b. ncu captures (serial)"
ncu_cap() {  # name which solution [extra python kwargs for ncu_command]
  local name=$1 which=$2 sol=$3 extra=${4:-}
  mapfile -t CMD < <(timeout 30 $PY - "$NCU" "$FIX/ncu_${name}.csv" "$which" "$P/$sol" "$FIX/target_ncu_${name}.json" <<PYEOF
import sys
from kernels_env.tools._ncu import ncu_command
ncu, log, which, sol, res = sys.argv[1:6]
t = [sys.executable, "-m", "kernels_env.tools._target", "--reference", "$P/ref_add.py", "--solution", sol,
     "--which", which, "--mode", "range", "--warmup", "2", "--iters", "1", "--result", res]
print("\n".join(ncu_command(ncu, t, log, launch_count=9 $extra)))
PYEOF
)
  echo "${CMD[*]}" > "$FIX/ncu_${name}.cmd"
  local t0=$SECONDS
  timeout "$(budget 45 150)" "${CMD[@]}" > "$FIX/ncu_${name}.stdout" 2>&1
  local rc=$?
  echo "ncu $name rc=$rc ($((SECONDS - t0)) s)" | tee -a "$FIX/ncu_rcs.txt"
}
# sections and the summary's metrics: the checked-in captures' layout (every metric of both, to compare)
ncu_cap membound_with_eager both sol_add_vec4.py ", sections=True"
ncu_cap computebound candidate sol_fma_heavy.py ", sections=True"
ncu_cap sections_only candidate sol_add_vec4.py ", sections=True, metrics=False"
# the profile tool's own command (SUMMARY_METRICS by name, no section): what a profile call collects now
ncu_cap summary_with_eager both sol_add_vec4.py
# the long (details) layout too, for the parser
timeout "$(budget 40 150)" "$NCU" --csv --page details --print-units base --clock-control none --launch-count 2 \
  --nvtx --nvtx-include kernels_env_profile/ --section SpeedOfLight --section Occupancy \
  --log-file "$FIX/ncu_details_membound.csv" -f \
  $PY -m kernels_env.tools._target --reference $P/ref_add.py --solution $P/sol_add_vec4.py --which candidate \
  --mode range --result "$FIX/target_details.json" > "$FIX/ncu_details.stdout" 2>&1
echo "ncu details rc=$?" | tee -a "$FIX/ncu_rcs.txt"
# Wait for the sanitizer jobs by pid: a bare `wait` would also wait for the `tee` process substitution above
# and never return.
wait "${SAN_PIDS[@]}"
cat "$FIX/sanitizer_rcs.txt"
if [ "$STEPS" = capture ] || [ ! -d tests/tools/fixtures/real ]; then
  tar -czf "$OUT/profiler_fixtures.tar.gz" -C "$WORK" real && echo "fixtures: $(du -h "$OUT/profiler_fixtures.tar.gz" | cut -f1)"
fi

step "1c. parsers on the fresh real outputs"
SAVED=""
if [ -d tests/tools/fixtures/real ]; then SAVED="$WORK/checked_in_real"; mv tests/tools/fixtures/real "$SAVED"; fi
cp -r "$FIX" tests/tools/fixtures/real
timeout "$(budget 60 140)" $PY -m pytest -q -p no:cacheprovider tests/tools/test_ncu_and_bottleneck.py \
  tests/tools/test_sanitizer_parser.py -k real -rA 2>&1 | tail -40
RC[real_parsers]=$?
rm -rf tests/tools/fixtures/real
if [ -n "$SAVED" ]; then mv "$SAVED" tests/tools/fixtures/real; fi

if [ "$STEPS" = capture ]; then  # a short run that only brings the real outputs back
  echo "SUMMARY profiler (capture only): real-fixture parsers rc=${RC[real_parsers]}"
  rm -rf "$WORK"; exit 0
fi

step "2. gpu tests (through the sandbox client)"
timeout "$(budget 160 60)" $PY -m pytest -q -p no:cacheprovider -m gpu tests/tools -s -rA 2>&1 | tail -80
RC[gpu_tests]=$?

step "3. benchmark: tool latency (through the sandbox client)"
timeout "$(budget 120 10)" $PY -m benchmarks.sandbox.tool_latency --out "$WORK/latency.json" --repeats 1
RC[benchmark]=$?

step "results"
timeout 30 $PY - "$WORK/latency.json" "$OUT/profiler_results.json" "${RC[real_parsers]}" "${RC[gpu_tests]}" "${RC[benchmark]}" <<'PYEOF'
import json, sys
lat, out, rp, gt, bm = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
res = {"real_fixture_parsers_rc": rp, "gpu_tests_rc": gt, "benchmark_rc": bm}
try:
    res["latency"] = json.load(open(lat))
except Exception as e:
    res["latency_error"] = str(e)
json.dump(res, open(out, "w"), indent=1)
s = res.get("latency", {}).get("summary", {})
print("SUMMARY profiler: real-fixture parsers rc=%d, gpu tests rc=%d, benchmark rc=%d" % (rp, gt, bm))
for k, v in s.items():
    print("  ", k, v)
PYEOF
rm -rf "$WORK"
