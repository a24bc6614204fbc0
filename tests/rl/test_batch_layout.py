"""The learner batch's layouts, padded and packed, against a plain numpy reference written here: every
per-token array bit for bit (values, dtypes, shapes), on varied trajectories (observation runs, explicit
and derived turn ids, log-probs on observation tokens, several group kinds, dropped records, per-turn
rewards, padding rows)."""

from __future__ import annotations

import numpy as np
import pytest

from research import rl
from research.rl._packing import first_fit_decreasing

FIELDS = ("tokens", "response_mask", "old_logprobs", "token_rewards", "token_discounts", "turn_ids")


def _records(rng, n=11):
    recs = []
    groups = ["a", "b", None, 3, "a", 3, None, "b", ("t", 1), "a", None]
    for j in range(n):
        prompt = rng.integers(1, 500, rng.integers(1, 9)).tolist()
        mask = []
        for _ in range(int(rng.integers(1, 4))):
            mask += [1] * int(rng.integers(1, 6))
            mask += [0] * int(rng.integers(0, 4))
        resp = rng.integers(1, 500, len(mask)).tolist()
        rec = {
            "prompt_ids": prompt,
            "response_ids": resp,
            "response_mask": mask,
            "logprobs": rng.normal(-2.0, 1.0, len(mask)).tolist(),  # observation entries must become 0
            "group": groups[j % len(groups)],
        }
        runs = np.cumsum(np.diff(np.concatenate([[0], mask])) == 1) - 1
        turns = int(runs.max()) + 1  # turns with no observation between them are one run
        if j % 3 == 0:  # explicit turn ids: two policy runs may share a turn
            tid = np.where(np.asarray(mask, bool), runs // 2, -1)
            rec["turn_ids"] = tid.tolist()
            turns = int(tid.max()) + 1
        rec["turn_verdicts"] = [{"status": "correct", "reward": float(rng.normal())} for _ in range(turns)]
        rec["reward"] = float(rng.normal())
        recs.append(rec)
    recs.insert(4, {"prompt_ids": [1, 2], "response_ids": [3], "response_mask": [0], "logprobs": [0.0]})
    recs.insert(7, {**recs[1], "prompt_ids": list(range(1, 40))})  # over max_len
    return recs


def _reference(records, reward: rl.RewardConfig, max_len, pad_to, rows_multiple, pad_id, packing):
    """(arrays by name, kept) built directly: one trajectory per row, or first-fit-decreasing rows."""
    kept, trajs = [], []
    for i, rec in enumerate(records):
        m = np.asarray(rec["response_mask"], bool)
        if not m.any() or len(rec["prompt_ids"]) + m.size > max_len:
            continue
        if rec.get("turn_ids"):
            tid = np.where(m, rec["turn_ids"], -1)
        else:
            tid = np.where(m, np.cumsum(np.diff(np.concatenate([[0], m.astype(int)])) == 1) - 1, -1)
        n_turns = tid.max() + 1
        per_turn = reward.placement == "per_turn"
        if per_turn:
            turn_r = [v["reward"] for v in rec["turn_verdicts"]]
        else:
            turn_r = [0.0] * (n_turns - 1) + [rec["reward"]]
        r, d = np.zeros(m.size), np.ones(m.size)
        for k in range(n_turns):
            last = np.flatnonzero(tid == k)[-1]
            r[last] = turn_r[k]
            d[last] = reward.turn_gamma if per_turn else 1.0
        lp = np.where(m, rec["logprobs"], 0.0)
        trajs.append((np.asarray(rec["prompt_ids"]), np.asarray(rec["response_ids"]), m, lp, r, d, tid))
        kept.append(i)
    lengths = [p.size + q.size for p, q, *_ in trajs]
    rows = first_fit_decreasing(lengths, max_len) if packing else [[i] for i in range(len(trajs))]
    t = -(-max(sum(lengths[i] for i in row) for row in rows) // pad_to) * pad_to
    b = -(-len(rows) // rows_multiple) * rows_multiple
    out = {
        "tokens": np.full((b, t), pad_id),
        "response_mask": np.zeros((b, t)),
        "old_logprobs": np.zeros((b, t)),
        "token_rewards": np.zeros((b, t)),
        "token_discounts": np.ones((b, t)),
        "turn_ids": np.full((b, t), -1),
        "segment_ids": np.zeros((b, t)),
        "positions": np.zeros((b, t)),
    }
    for row, members in enumerate(rows):
        col = 0
        for seg, i in enumerate(members, start=1):
            p, q, m, lp, r, d, tid = trajs[i]
            for c, tok in enumerate(np.concatenate([p, q])):
                out["tokens"][row, col + c] = tok
                out["segment_ids"][row, col + c] = seg
                out["positions"][row, col + c] = c
            for c in range(q.size):
                at = col + p.size + c
                out["response_mask"][row, at] = m[c]
                out["old_logprobs"][row, at] = np.float32(lp[c])
                out["token_rewards"][row, at] = np.float32(r[c])
                out["token_discounts"][row, at] = np.float32(d[c])
                out["turn_ids"][row, at] = tid[c]
            col += p.size + q.size
    return out, kept, b


@pytest.mark.parametrize("packing", [False, True])
@pytest.mark.parametrize(
    "reward,pad_to,rows_multiple,pad_id",
    [
        (rl.RewardConfig(), 8, 1, 0),
        (rl.RewardConfig(placement="per_turn", turn_gamma=0.7), 1, 4, 7),
        (rl.RewardConfig(), 16, 3, 511),
    ],
)
def test_layout_matches_the_reference(packing, reward, pad_to, rows_multiple, pad_id):
    records = _records(np.random.default_rng([pad_to, rows_multiple]))
    cfg = rl.PackConfig(
        max_len=30, pad_to=pad_to, rows_multiple=rows_multiple, pad_id=pad_id, packing=packing
    )
    batch, drops, kept = rl.pack_trajectories(records, reward, cfg)
    want, want_kept, b = _reference(records, reward, 30, pad_to, rows_multiple, pad_id, packing)
    assert kept == want_kept and drops["no_policy_token"] == 1 and drops["too_long"] == 1
    dtypes = dict.fromkeys(("tokens", "turn_ids", "segment_ids", "positions"), np.int32)
    for name in (*FIELDS, "segment_ids", "positions"):
        got = getattr(batch, name)
        if name == "positions" and not packing:
            assert got is None  # its presence is what makes the learner pass segments to the model
            continue
        assert got.dtype == dtypes.get(name, np.float32), name
        np.testing.assert_array_equal(got, want[name].astype(got.dtype), err_msg=name)
    groups: dict = {}
    real = [
        groups.setdefault(i if records[i].get("group") is None else records[i]["group"], len(groups))
        for i in kept
    ]
    if packing:  # groups are per trajectory; row-level ids are only kept for the layout
        np.testing.assert_array_equal(batch.segments.group_ids, real)
        np.testing.assert_array_equal(batch.group_ids, np.arange(b))
        return
    assert batch.segments is None
    # padding rows take group ids after the real ones
    np.testing.assert_array_equal(
        batch.group_ids, real + list(range(len(groups), len(groups) + b - len(kept)))
    )
    assert batch.group_ids.dtype == np.int32
