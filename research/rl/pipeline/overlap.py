"""Rollouts overlapped with learning (``OverlapConfig``, the PPO-style stages): a background thread generates
the next batches, each with a copy of the weights of the step that launched it, while the learner updates
on the current one.

Schedule (k = ``max_staleness``): the first call of a stage (fresh or resumed) generates its batch with the
current weights and queues the next k; every later call takes the oldest queued batch and queues one more
with the weights as they are then. The batch of step s was generated after ``max(0, s - 1 - k)`` steps
(its policy version); it trains after s - 1, so its staleness (``async/staleness``) is 0, 1, .., k and then
k. k = 0 generates in the thread but waits for it: the same batches and updates as on-policy.

One thread runs every rollout of the stage (the environment, its judge, the sampler); the main thread only
copies the weights (the learner's update donates its buffers, so the sampler never holds them) and waits.
Jobs run one after another, so each starts at the cursor the previous one ended at: the batches are the
same whatever the timing. Resume: the checkpoint holds the learner's step (the policy version) and the
cursor after the last trained batch; the batches in flight at the kill are regenerated from that cursor
with the checkpoint's weights, so the k steps after a resume see staleness 0, 1, .. as a fresh stage does
(deterministic, but not the uninterrupted run's batches: only ``enabled=false`` resumes bit-exactly).
"""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import nnx


@dataclass
class OverlapConfig:
    """``enabled``: generate the next batches in a background thread while the learner updates (the
    warm-up and PPO stages); ``max_staleness``: how many policy versions a batch may lag the learner by
    (its generation runs that many steps ahead). Off: on-policy, as before."""

    enabled: bool = False
    max_staleness: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValueError(f"overlap.enabled must be true or false, got {self.enabled!r}")
        if isinstance(self.max_staleness, bool) or not isinstance(self.max_staleness, int):
            raise ValueError(f"overlap.max_staleness must be an integer >= 0, got {self.max_staleness!r}")
        if self.max_staleness < 0:
            raise ValueError(f"overlap.max_staleness must be >= 0, got {self.max_staleness}")


class OverlappedSource:
    """The training loop's ``source(cursor)`` with generation in a background thread.

    ``generate(model, cursor) -> (batch, next cursor, metrics)`` runs in the thread; ``steps``: the stage's
    last step (nothing is generated beyond it). :meth:`close` stops the thread (queued jobs cancelled, the
    running one finished)."""

    def __init__(self, learner, generate, steps: int, max_staleness: int, box: dict, check=lambda: None):
        self.learner, self.generate, self.steps, self.k = learner, generate, steps, max_staleness
        self.box, self.check = box, check
        cfg = learner.config
        self.updates_per_step = max(cfg.epochs * cfg.minibatches, 1)
        self.pending: deque = deque()
        self.next_cursor = None  # the worker's: where its next job starts
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollouts")

    def version(self) -> int:
        """PPO steps the learner has taken (its policy version)."""
        return int(self.learner.state.step) // self.updates_per_step

    def _snapshot(self):
        # a copy: the learner's next update donates (frees) the arrays the sampler would otherwise read
        return nnx.merge(self.learner.actor_def, jax.tree.map(jnp.copy, self.learner.state.actor))

    def _job(self, model, version: int):
        t0 = time.perf_counter()
        batch, cursor, metrics = self.generate(model, self.next_cursor)
        self.next_cursor = cursor
        return batch, cursor, metrics, version, time.perf_counter() - t0

    def _launch(self, version: int) -> None:
        self.pending.append(self.pool.submit(self._job, self._snapshot(), version))

    def __call__(self, cursor):
        self.check()
        v = self.version()
        if not self.pending:  # the stage's first call (fresh or resumed): this batch with these weights
            self.next_cursor = cursor
            self._launch(v)
        t0 = time.perf_counter()
        batch, cursor, metrics, made_by, gen_s = self.pending.popleft().result()
        wait = time.perf_counter() - t0
        step = v + 1  # the step this batch trains
        while len(self.pending) < self.k and step + len(self.pending) < self.steps:
            self._launch(v)
        self.box["cursor"] = cursor
        metrics = {
            **metrics,
            "async/staleness": float(v - made_by),
            "async/policy_version": float(made_by),
            "time/generate_wall_s": gen_s,  # the whole job: sampling, judging, packing
            "time/wait_s": wait,  # the learner idle, waiting for it
            "time/overlapped_s": max(gen_s - wait, 0.0),  # of it, hidden behind learning
        }
        return batch, cursor, metrics

    def close(self) -> None:
        for f in self.pending:
            f.cancel()
        self.pending.clear()
        self.pool.shutdown(wait=True, cancel_futures=True)
