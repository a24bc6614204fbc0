"""What every pipeline stage does around its own work (``stages.py``): its directory under the run, the
evaluation after it, its learner run through ``research.rl.train`` (checkpointing the steps it finished when
the time budget runs out), the manifest it hands on, and the learner source over fixed batches."""

from __future__ import annotations

import json
from pathlib import Path

from .._checkpoint import CheckpointDir
from .._distributed import is_primary, sync
from .._loop import RunConfig, train
from .._metrics import read_metrics
from .evaluate import eval_rollout, evaluate_policy
from .manifest import Manifest
from .runtime import DeadlineReached, Runtime


def stage_dir(rt: Runtime, stage: str) -> Path:
    return rt.out / stage


def evaluate_stage(rt: Runtime, stage: str, model, rollout) -> dict:
    if not rt.cfg.eval.enabled:
        return {}
    if rt.cfg.env == "agent":
        # one evaluation protocol after every stage: the multi-turn (PPO) rollout's context budget, or the
        # single-turn warm-up's for eval.turns=1 (the agent's multi-turn prompt carries the tools)
        rollout = rt.cfg.ppo.rollout if rt.cfg.eval.turns > 1 else rt.cfg.warmup.rollout
    sampler = rt.sampler(model, rollout)
    final = not rt.cfg.stages or stage == rt.cfg.stages[-1]
    metrics, records = evaluate_policy(
        rt.eval_env if final else rt.interim_eval_env,
        sampler,
        eval_rollout(rollout, rt.cfg.eval),
        rt.cfg.eval,
        rt.cfg.reward,
    )
    d = stage_dir(rt, stage)
    if is_primary():  # several processes: the records were gathered, every process has them all
        d.mkdir(parents=True, exist_ok=True)
        (d / "eval.json").write_text(json.dumps(metrics, indent=2))
        with (d / "eval_records.jsonl").open("w") as f:
            for split, recs in records.items():
                for r in recs:
                    row = {"split": split, "task_id": r.task_id, "final_plan": r.info.get("final_plan")}
                    f.write(json.dumps({**row, "verdict": r.verdict, "end_reason": r.end_reason}) + "\n")
    sync(f"eval:{d}")
    return metrics


def learner_stage(rt, stage, learner, source, steps, save_every, kind, cursor_box) -> tuple[list, bool]:
    out = stage_dir(rt, stage)
    run = RunConfig(
        out_dir=str(out),
        steps=steps,
        kind=kind,
        save_every=save_every,
        progress=rt.cfg.progress,
        tensorboard=rt.cfg.tensorboard,
    )
    try:
        rows = train(learner, source, run)
        return rows, False
    except DeadlineReached:
        sync(f"deadline:{out}")  # process 0 has closed the metrics file the others read
        rows = read_metrics(out)
        done = rows[-1]["step"] if rows else 0
        ckpts = CheckpointDir(out / "checkpoints", keep=run.keep)
        if done and done not in ckpts.steps():
            ckpts.save(done, learner, cursor=cursor_box.get("cursor"), extra={"run_step": done})
        return rows, True


def _summary(rows: list[dict]) -> dict:
    if not rows:
        return {}
    keys = (
        "reward_mean",
        "pass_rate",
        "faster_eager",
        "faster_compile",
        "nll",
        "value_loss",
        "explained_variance",
        "entropy",
        "clip_frac",
        "opt/any",
    )
    return {k: rows[-1][k] for k in keys if k in rows[-1]} | {"steps_done": rows[-1]["step"]}


def stage_manifest(
    rt, stage, h, prev, learner_dir, rows, truncated, keep_actor=None, keep_critic=None, **extra
):
    latest = CheckpointDir(learner_dir / "checkpoints").latest() if learner_dir else None
    part = lambda name: str(latest / name) if latest is not None and (latest / name).is_dir() else None
    actor = keep_actor if keep_actor is not None else (part("actor") or prev.actor)
    critic = keep_critic if keep_critic is not None else part("critic")
    m = Manifest(
        stage=stage,
        actor=actor,
        critic=critic,
        step=rows[-1]["step"] if rows else 0,
        config_hash=h,
        metrics=_summary(rows),
        inputs=str(stage_dir(rt, prev.stage) / "manifest.json"),
        extra={"truncated": truncated, **extra},
    )
    return m


def cycle(rt: Runtime, batches: list, box: dict, metrics: dict):
    """A learner source over fixed batches, round and round (SFT, RFT, value pretraining); ``box`` keeps
    the cursor a truncated stage checkpoints."""

    def source(cursor):
        rt.check_deadline()
        box["cursor"] = int(cursor) + 1
        return batches[int(cursor) % len(batches)], int(cursor) + 1, metrics

    return source
