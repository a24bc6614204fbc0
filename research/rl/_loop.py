"""A resumable training loop: batches from a source, one learner step each, metrics every step,
checkpoints every ``save_every`` steps and at the end, curves when done.

Resume is exact: the learner state (weights, optimizer moments, step, RNG) and the data cursor come back
from the newest complete checkpoint, metrics of later steps are cut from the JSONL and recomputed. Metric
order within a step: written before the checkpoint, so a kill between the two only repeats work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._checkpoint import CheckpointDir
from ._distributed import is_primary, sync
from ._metrics import MetricsWriter, plot_curves, read_metrics

STEPS = {"ppo": "ppo_step", "rft": "rft_step", "value": "value_step"}


@dataclass
class RunConfig:
    out_dir: str = "runs/rl"
    steps: int = 10
    kind: str = "ppo"  # ppo | rft | value: which learner step
    save_every: int = 1
    keep: int = 2
    tensorboard: bool = True
    plot: bool = True
    progress: bool = True


class _NoWriter:
    def truncate(self, step: int) -> None: ...

    def write(self, step: int, metrics: dict) -> None: ...

    def close(self) -> None: ...


# source(cursor) -> (batch, next cursor, extra metrics); cursors are JSON values (they go into learner.json).
BatchSource = Callable[[Any], tuple[Any, Any, dict]]


def train(learner, source: BatchSource, cfg: RunConfig, *, cursor: Any = 0) -> list[dict]:
    """Run (or resume) ``cfg.steps`` steps; returns the metrics rows of the whole run."""
    if cfg.kind not in STEPS:
        raise ValueError(f"unknown step kind {cfg.kind!r}; known: {sorted(STEPS)}")
    out = Path(cfg.out_dir)
    ckpts = CheckpointDir(out / "checkpoints", keep=cfg.keep)
    step = 0
    latest = ckpts.latest()
    if latest is not None:
        meta = learner.restore(latest)
        step, cursor = int(meta["extra"]["run_step"]), meta["cursor"]
    primary = is_primary()  # several processes: every one steps and checkpoints, process 0 alone logs
    writer = (
        MetricsWriter(out, tensorboard=cfg.tensorboard, purge_step=step + 1 if step else None)
        if primary
        else _NoWriter()
    )
    writer.truncate(step)
    run = getattr(learner, STEPS[cfg.kind])
    bar = None
    if cfg.progress and primary:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, initial=step, desc=f"rl/{cfg.kind}", leave=False)
    try:
        for s in range(step + 1, cfg.steps + 1):
            t0 = time.perf_counter()
            batch, cursor, extra = source(cursor)
            t1 = time.perf_counter()
            metrics = run(batch)
            t2 = time.perf_counter()
            writer.write(s, {**extra, **metrics, "time/data_s": t1 - t0, "time/learn_s": t2 - t1})
            if s % cfg.save_every == 0 or s == cfg.steps:
                ckpts.save(s, learner, cursor=cursor, extra={"run_step": s})
            if bar is not None:
                bar.update(1)
    finally:
        writer.close()
        if bar is not None:
            bar.close()
    sync(f"train:{out}:done")  # the other processes read process 0's metrics file below
    if cfg.plot and primary:
        plot_curves(out / "metrics.jsonl", out / "curves.png", title=f"rl/{cfg.kind}")
    return read_metrics(out)
