"""The learner's batch: trajectories (``research.rollout.Trajectory``, verl's layout) packed into
right-padded [B, T] arrays.

A trajectory (one per episode; a dict record such as a JSONL line is read with ``as_trajectory``) has

* ``prompt_ids`` [P] and ``response_ids`` [R] (token ids, kept as tokens end to end);
* ``response_mask`` [R]: 1 = policy token (sampled by the policy), 0 = observation token (tool output,
  sandbox feedback) inside the response;
* ``logprobs`` [R]: the sampler's log-prob of each policy token (anything on observation tokens);
* ``turn_ids`` [R] (may be empty): the turn of each policy token; default: each maximal run of policy
  tokens is one turn;
* ``verdict`` (the final sandbox verdict dict) or ``reward`` (a float already computed); each turn's
  ``Turn.verdict`` for per-turn rewards (see _rewards.py);
* ``group`` (optional, any hashable): rollouts of the same prompt (GRPO / RLOO / TRLOO groups).

Every per-token array of :class:`RLBatch` is aligned with ``tokens``: entry t is about token t (its
sampler log-prob, its reward, the value of the prefix before it). Position 0 is never a policy token (a
prompt comes first), so the learner's next-token log-probs [B, T-1] line up with entries 1..T-1. Rows are
right-padded, so causal attention needs no padding mask (padding only follows real tokens) and positions
are 0.. per row.

``PackConfig.packing`` packs several trajectories into one row instead (_packing.py): ``segment_ids``
number them per row (0 = padding), ``positions`` restart at 0 per segment, attention is causal within a
segment, and ``segments`` maps every trajectory back to its own padded row for the per-trajectory math.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from research.rollout import Trajectory, TrajectoryError, as_trajectory

from ._batch_types import PackConfig, RLBatch, SegmentLayout
from ._packing import pack_rows, write_rows
from ._rewards import DropCounter, Dropped, RewardConfig, episode_turn_rewards, place_rewards, turn_spans


def _record_turns(traj: Trajectory, mask: np.ndarray) -> np.ndarray:
    if traj.turn_ids is not None and len(traj.turn_ids):
        return np.where(mask, np.asarray(traj.turn_ids, np.int32), -1)  # its length: Trajectory checks it
    tid = np.full(mask.shape, -1, np.int32)
    for k, (a, b) in enumerate(turn_spans(mask)):
        tid[a:b] = k
    return tid


def pack_trajectories(
    records: Iterable[Trajectory | dict], reward: RewardConfig, cfg: PackConfig | None = None
):
    """(RLBatch of numpy arrays, DropCounter, kept indices). Episodes that must not become rewards, that
    have no policy token or that exceed ``max_len`` are dropped and counted."""
    cfg = cfg or PackConfig()
    drops = DropCounter()
    rows, kept = [], []
    for i, rec in enumerate(records):
        try:
            rec = as_trajectory(rec)
        except TrajectoryError as exc:
            raise TrajectoryError(f"record {i}: {exc}") from None
        prompt = np.asarray(rec.prompt_ids, np.int32)
        resp = np.asarray(rec.response_ids, np.int32)
        mask = np.asarray(rec.response_mask, bool)
        if prompt.size == 0:
            raise ValueError(f"record {i}: empty prompt (the first token cannot be a policy token)")
        if not mask.any():
            drops["no_policy_token"] += 1
            continue
        if prompt.size + resp.size > cfg.max_len:
            drops["too_long"] += 1
            continue
        tid = _record_turns(rec, mask)
        n_turns = int(tid.max()) + 1
        if n_turns > cfg.max_turns:
            drops["too_many_turns"] += 1
            continue
        try:
            turn_rewards = episode_turn_rewards(rec, n_turns, reward)
        except Dropped as d:
            drops[d.reason] += 1
            continue
        r, d = place_rewards(mask, tid, turn_rewards, reward)
        lp = np.asarray(rec.logprobs, np.float32)
        rows.append((prompt, resp, mask, lp, r, d, tid, i if rec.group is None else rec.group))
        kept.append(i)
    if not rows:
        return None, drops, kept
    if cfg.packing:
        return pack_rows(rows, cfg), drops, kept
    longest = max(p.size + r.size for p, r, *_ in rows)
    t = -(-longest // cfg.pad_to) * cfg.pad_to
    b = -(-len(rows) // cfg.rows_multiple) * cfg.rows_multiple
    out, _ = write_rows(rows, [[j] for j in range(len(rows))], (b, t), cfg.pad_id)  # one per row
    groups: dict = {}
    group_ids = np.arange(b, dtype=np.int32)  # padding rows: groups of their own
    for j, row in enumerate(rows):
        group_ids[j] = groups.setdefault(row[-1], len(groups))
    # Padding rows take group ids after the real ones (still < B, as the estimators need).
    group_ids[len(rows) :] = np.arange(len(groups), len(groups) + b - len(rows))
    return RLBatch(group_ids=group_ids, **out), drops, kept


__all__ = ["PackConfig", "RLBatch", "SegmentLayout", "pack_trajectories"]
