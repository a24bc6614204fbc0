"""The learner batch's types (``_batch.py`` builds a batch, ``_packing.py`` packs its rows): an ``RLBatch``,
the ``SegmentLayout`` of a packed one and the ``PackConfig`` that shapes both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


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
