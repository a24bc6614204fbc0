#!/usr/bin/env bash
# One seed of the learning study (issue #32; docs/text_policy.md, docs/study_protocol.md), end to end:
# synthesize tasks -> fix the protocol -> the cold-start corpus on the protocol's train tasks and the text
# policy built on it -> SFT alone (the baseline) and the full staged pipeline -> both evaluated on dev.
# Test splits are NOT touched here (evaluate them once, at the end of the study, with experiments.study).
#   OUT=/some/dir bash scripts/gpu_study.sh                       # the H200: GPU sandbox, preset text_policy
#   OUT=/tmp/s STUDY_DEVICE=cpu bash scripts/gpu_study.sh         # CPU: the same chain at toy sizes (wiring)
# Knobs: SEED, STUDY_TASKS (synthesized), CORPUS_TASKS (0: every covered train task), N_SPLIT (dev and test
# split sizes; the study's floor is 48), STUDY_DIR (default $OUT/study; reruns resume every step),
# STUDY_SCALE=pilot (GPU: small sizes, eager baseline only, three run workers: times each step in one call).
set -o pipefail
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HYDRA_FULL_ERROR=0
: "${OUT:?set OUT to the output directory}"
PY=${PYTHON:-python3}
SEED=${SEED:-0}
DEV=${STUDY_DEVICE:-gpu}
D=${STUDY_DIR:-$OUT/study}
mkdir -p "$D"
LOG="$OUT/study.log"
: >> "$LOG"
step() {  # step NAME SECONDS CMD...: logged, timed; a failed step stops the chain (later ones need it)
  local name=$1 limit=$2; shift 2
  echo "=== [$name] (timeout ${limit}s) $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=$?
  echo "=== [$name] rc=$rc in $((SECONDS - t0))s" | tee -a "$LOG"
  [ "$rc" -eq 0 ] || exit "$rc"
}
if [ "$DEV" = cpu ]; then
  TASKS=${STUDY_TASKS:-40}; CORPUS=${CORPUS_TASKS:-3}; N=${N_SPLIT:-2}
  SYN=(filters.compile_backend=none filters.inductor_fraction=0)
  TRAIN=(preset=agent_cpu model=hf "sft.epochs=3" "ppo.steps=1")
  EVAL=(sandbox=cpu judge.num_trials=2 "judge.families=[]" judge.time_candidate=false)
elif [ "${STUDY_SCALE:-full}" = pilot ]; then  # one H200 call (~9 min): times every step to size the study
  TASKS=${STUDY_TASKS:-120}; CORPUS=${CORPUS_TASKS:-32}; N=${N_SPLIT:-8}
  SYN=()
  JUDGE=(sandbox.run_workers_per_gpu=3 sandbox.num_compile_workers=8 "judge.baselines=[eager]")
  TRAIN=(preset=text_policy "${JUDGE[@]}" sft.epochs=30 warmup.steps=2 warmup.rollout.episodes=16 rft.rollout_batches=1
    rft.rollout.episodes=16 value.steps=4 ppo.steps=3 ppo.rollout.episodes=16)
  EVAL=(sandbox=gpu "${JUDGE[@]}")
  CORPUS_OPTS=(corpus.concurrency=8)
else
  TASKS=${STUDY_TASKS:-600}; CORPUS=${CORPUS_TASKS:-0}; N=${N_SPLIT:-48}
  SYN=()
  TRAIN=(preset=text_policy)
  EVAL=(sandbox=gpu)
fi
DATA="$D/data"; P="$D/protocol.json"; C="$D/corpus"
step synthesize 900 "$PY" -m experiments.synthesize num_tasks="$TASKS" seed="$SEED" out_dir="$DATA" progress=false \
  "${SYN[@]}" hydra.run.dir="$D/hydra/synthesize"
[ -f "$P" ] || step protocol 120 "$PY" -m experiments.study study.mode=fix study.protocol="$P" tasks=data \
  tasks.path="$DATA" study.fix.seed="$SEED" study.fix.n_dev="$N" study.fix.n_test_seen="$N" \
  study.fix.n_test_heldout="$N" study.fix.min_test_tasks="$N" hydra.run.dir="$D/hydra/protocol"
step corpus 1800 "$PY" -m experiments.corpus data_dir="$DATA" out_dir="$C" protocol="$P" sandbox="$DEV" \
  corpus.seed="$SEED" corpus.max_tasks="$CORPUS" corpus.skills=false text_policy.build=true \
  text_policy.seed="$SEED" "${EVAL[@]:1}" "${CORPUS_OPTS[@]}" hydra.run.dir="$D/hydra/corpus"
COMMON=(env=agent "${TRAIN[@]}" model.checkpoint="$C/text_policy" tasks=data tasks.path="$DATA" tasks.protocol="$P"
  "eval.splits=[dev]" sft.demos="$C" seed="$SEED" progress=false tensorboard=false)
step train-sft 1800 "$PY" -m experiments.train "${COMMON[@]}" "stages=[sft]" out_dir="$D/runs/sft-s$SEED" \
  hydra.run.dir="$D/hydra/sft"
step train-full 3600 "$PY" -m experiments.train "${COMMON[@]}" out_dir="$D/runs/full-s$SEED" \
  hydra.run.dir="$D/hydra/full"
for run in sft full; do
  step "eval-$run" 1800 "$PY" -m experiments.study study.run="$run-s$SEED" study.split=dev study.seed="$SEED" \
    study.train_config="$D/runs/$run-s$SEED" policy=flax policy.model="$D/runs/$run-s$SEED/final_policy" \
    "${EVAL[@]}" study.results="$D/results/$run-s$SEED.dev.json" out_dir="$D/eval/$run-s$SEED" \
    hydra.run.dir="$D/hydra/eval-$run"
done
METRIC=faster_than_compile; [ "$DEV" = cpu ] && METRIC=pass; [ "${STUDY_SCALE:-full}" = pilot ] && METRIC=faster_than_eager
step compare 300 "$PY" -m experiments.study study.mode=compare study.protocol="$P" study.metric="$METRIC" \
  "study.runs=[$D/results/full-s$SEED.dev.json,$D/results/sft-s$SEED.dev.json]" hydra.run.dir="$D/hydra/compare"
step report 300 "$PY" -m notebooks.study_report "$D"
