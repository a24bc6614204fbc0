"""Sequence packing: several trajectories per row of the learner's batch (``PackConfig(packing=True)``).

Trajectories are placed first-fit decreasing (longest first, each into the first row with room) into rows
of ``max_len`` tokens. A row's trajectories are numbered 1, 2, ... in ``segment_ids`` (0 = padding) and
their ``positions`` restart at 0, so with attention kept within a segment (``models``' ``segment_ids``)
each trajectory sees exactly what it would see alone in a row. Everything per trajectory that the learner
computes across tokens (GAE, returns, group baselines, turn tables) runs on ``SegmentLayout``'s view: the
[S, L] padded layout of the same trajectories, gathered from and scattered back to the packed rows.
"""

from __future__ import annotations

import numpy as np

from ._batch_types import PackConfig, RLBatch, SegmentLayout


def first_fit_decreasing(lengths, capacity: int) -> list[list[int]]:
    """Rows of item indices, each row's lengths summing to at most ``capacity`` (every length fits)."""
    rows, room = [], []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):  # stable: ties keep record order
        for r, free in enumerate(room):
            if lengths[i] <= free:
                rows[r].append(i)
                room[r] -= lengths[i]
                break
        else:
            rows.append([i])
            room.append(capacity - lengths[i])
    return rows


def write_rows(rows, placed, shape, pad_id: int, index_len: int | None = None):
    """(per-token arrays [B, T] = ``shape`` by RLBatch field, SegmentLayout index or None) of
    ``_batch.pack_trajectories``' kept ``rows``: row k holds the trajectories ``placed[k]`` one after
    another, numbered 1, 2, ... in ``segment_ids``. With ``index_len`` (the padded layout's T) the packed
    extras too: ``positions`` restarting at 0 per trajectory and the [S, index_len] index. The padded
    layout is this with one trajectory per row and no extras."""
    b, t = shape
    out = {
        "tokens": np.full((b, t), pad_id, np.int32),
        "response_mask": np.zeros((b, t), np.float32),
        "old_logprobs": np.zeros((b, t), np.float32),
        "token_rewards": np.zeros((b, t), np.float32),
        "token_discounts": np.ones((b, t), np.float32),
        "turn_ids": np.full((b, t), -1, np.int32),
        "segment_ids": np.zeros((b, t), np.int32),
    }
    index = None
    if index_len is not None:
        out["positions"] = np.zeros((b, t), np.int32)
        index = np.full((len(rows), index_len), b * t, np.int32)
    for row, members in enumerate(placed):
        col = 0
        for seg, i in enumerate(members, start=1):
            prompt, resp, mask, lp, r, d, tid, _ = rows[i]
            p, n = prompt.size, resp.size
            out["tokens"][row, col : col + p] = prompt
            resp_at = slice(col + p, col + p + n)
            out["tokens"][row, resp_at] = resp
            out["response_mask"][row, resp_at] = mask
            out["old_logprobs"][row, resp_at] = np.where(mask, lp, 0.0)
            out["token_rewards"][row, resp_at] = r
            out["token_discounts"][row, resp_at] = d
            out["turn_ids"][row, resp_at] = tid
            out["segment_ids"][row, col : col + p + n] = seg
            if index is not None:
                out["positions"][row, col : col + p + n] = np.arange(p + n)
                index[i, : p + n] = row * t + col + np.arange(p + n)
            col += p + n
    return out, index


def bucket_rows(n: int, multiple: int, capacity: int) -> int:
    """The rows of a packed batch of ``n`` rows under ``PackConfig.capacity``: ``multiple`` x the least
    power of two that holds them, at most ``capacity`` rounded up to ``multiple`` (n never exceeds it)."""
    units = -(-n // multiple)
    return min(multiple << max(units - 1, 0).bit_length(), -(-capacity // multiple) * multiple)


def pack_rows(rows, cfg: PackConfig) -> RLBatch:
    """The packed RLBatch of ``_batch.pack_trajectories``'s kept rows (prompt, response, mask, log-probs,
    rewards, discounts, turn ids, group)."""
    lengths = [p.size + r.size for p, r, *_ in rows]
    placed = first_fit_decreasing(lengths, cfg.max_len)
    cap = cfg.capacity
    if cap is None:
        t = -(-max(sum(lengths[i] for i in row) for row in placed) // cfg.pad_to) * cfg.pad_to
        b = -(-len(placed) // cfg.rows_multiple) * cfg.rows_multiple
        seq_len = -(-max(lengths) // cfg.pad_to) * cfg.pad_to  # the padded layout's T
    else:
        if len(rows) > cap:
            raise ValueError(f"{len(rows)} trajectories exceed the packed batch's capacity of {cap}")
        t = seq_len = cfg.max_len
        b = bucket_rows(len(placed), cfg.rows_multiple, cap)
    out, index = write_rows(rows, placed, (b, t), cfg.pad_id, seq_len)
    groups: dict = {}
    group_ids = [groups.setdefault(g, len(groups)) for *_, g in rows]
    if cap is not None:  # table rows of no token (every index past the end), each a group of its own
        index = np.concatenate([index, np.full((cap - len(rows), seq_len), b * t, np.int32)])
        group_ids += range(len(groups), len(groups) + cap - len(rows))
    # Row-level group ids are unused in a packed batch (groups are per trajectory): kept for the layout.
    layout = SegmentLayout(index, np.asarray(group_ids, np.int32))
    return RLBatch(group_ids=np.arange(b, dtype=np.int32), segments=layout, **out)


def unpack(x, layout: SegmentLayout, fill=0):
    """Packed [B, T] -> the trajectories' padded layout [S, L] (``fill`` past each trajectory's end)."""
    import jax.numpy as jnp

    flat = jnp.concatenate([x.reshape(-1), jnp.full((1,), fill, x.dtype)])
    return flat[layout.index]


def repack(y, layout: SegmentLayout, shape):
    """[S, L] -> packed [B, T] (the inverse of :func:`unpack` on real tokens; 0 on padding)."""
    import jax.numpy as jnp

    b, t = shape
    flat = jnp.zeros((b * t + 1,), y.dtype).at[layout.index.reshape(-1)].set(y.reshape(-1), mode="drop")
    return flat[:-1].reshape(b, t)
