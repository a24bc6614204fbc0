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
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from research.rollout import Trajectory, TrajectoryError, as_trajectory

from ._rewards import DropCounter, Dropped, RewardConfig, episode_turn_rewards, place_rewards, turn_spans


class RLBatch(NamedTuple):
    tokens: object  # int32 [B, T]
    response_mask: object  # float32 [B, T]: 1 policy token
    old_logprobs: object  # float32 [B, T]: the sampler's (replaced by the learner's when recomputed)
    token_rewards: object  # float32 [B, T]
    token_discounts: object  # float32 [B, T]: multiplies gamma at a policy token (turn boundaries)
    turn_ids: object  # int32 [B, T]: turn of a policy token, -1 elsewhere
    group_ids: object  # int32 [B]: in [0, B)
    # Filled by the learner's ``prepare`` (None in a freshly packed batch):
    values: object = None  # float32 [B, T]: V(prefix before token t)
    ref_logprobs: object = None
    advantages: object = None
    returns: object = None
    # float32 [B, T]: truncated importance weights of the sampler/learner gap (LossConfig.tis_cap; else None)
    tis_weights: object = None
    # Layout (None when a batch is built by hand): segment_ids int32 [B, T], 0 = padding, else the
    # trajectory's number within its row (1 per row when padded); positions int32 [B, T] only in a packed
    # batch (their presence is what makes the learner pass segments to the model); segments: a packed
    # batch's SegmentLayout, consumed by the learner's ``prepare`` (not row-aligned).
    segment_ids: object = None
    positions: object = None
    segments: object = None


class SegmentLayout(NamedTuple):
    """Where a packed batch's trajectories are: ``index`` int32 [S, L], the flat index (row * T + column)
    in the packed [B, T] arrays of token j of trajectory s, B * T past its end; ``group_ids`` int32 [S],
    the trajectory's rollout group in [0, S). [S, L] is the padded layout of the same trajectories."""

    index: object
    group_ids: object


@dataclass
class PackConfig:
    max_len: int = 4096  # longer episodes are dropped (counted as too_long), never truncated
    pad_to: int = 64  # T is rounded up to a multiple of this (fewer distinct shapes to compile)
    rows_multiple: int = 1  # B is rounded up (padding rows have no policy token): micro-batches x shards
    pad_id: int = 0
    max_turns: int = 64
    # Several trajectories per row of max_len (first-fit decreasing), attention kept within each one:
    # less padding when lengths vary (research.rl docs: "Learner at size").
    packing: bool = False
    # Packed batches from a few shapes (each new shape recompiles the jitted steps): with ``capacity`` (the
    # most trajectories one batch may hold) T and the segment table's L are ``max_len``, B is rows_multiple
    # x a power of two (at most ``capacity`` rounded up to rows_multiple) and the table has ``capacity``
    # rows; padding rows and table rows hold no token. None: every size fitted to the batch.
    capacity: int | None = None


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
    from ._packing import pack_rows, write_rows  # _packing builds on this module's types

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
