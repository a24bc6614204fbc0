"""Synthetic multi-turn trajectory records (verl layout) for smoke runs, tests and the update benchmark.

Deterministic in (seed, index): record i of a source is the same in every process, so a resumed run sees
the same data. Each record alternates policy turns and observation spans; its reward is a toy verdict-like
score (the share of "low" token ids among the policy tokens, scaled to [-1, 3]), so a learner can improve it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._batch import PackConfig, pack_trajectories
from ._rewards import RewardConfig


def synthetic_record(
    rng: np.random.Generator, vocab: int, prompt_len: int, turn_len: int, obs_len: int, turns: int, group
) -> dict:
    prompt = rng.integers(1, vocab, prompt_len)
    ids, mask = [], []
    for k in range(turns):
        ids += rng.integers(1, vocab, turn_len).tolist()
        mask += [1] * turn_len
        if k < turns - 1:
            ids += rng.integers(1, vocab, obs_len).tolist()
            mask += [0] * obs_len
    policy = np.asarray(ids)[np.asarray(mask, bool)]
    reward = -1.0 + 4.0 * float(np.mean(policy < vocab // 2))
    logprobs = np.where(np.asarray(mask, bool), -np.log(vocab) + rng.normal(0, 0.05, len(ids)), 0.0)
    return {
        "prompt_ids": prompt.tolist(),
        "response_ids": ids,
        "response_mask": mask,
        "logprobs": logprobs.tolist(),
        "reward": reward,
        "group": group,
    }


# A field list like other small configs' (textpolicy.spec, the policy configs): shape only, nothing shared.
@dataclass
class SyntheticSource:
    """``source(cursor) -> (RLBatch, next_cursor, metrics)`` over synthetic records (cursor = batch index)."""

    vocab: int = 256
    batch: int = 8
    group_size: int = 2
    prompt_len: int = 8
    turn_len: int = 6
    obs_len: int = 4
    turns: int = 2
    seed: int = 0
    pad_to: int = 8

    def records(self, cursor: int) -> list[dict]:
        rng = np.random.default_rng([self.seed, int(cursor)])
        return [
            synthetic_record(
                rng,
                self.vocab,
                self.prompt_len,
                self.turn_len,
                self.obs_len,
                self.turns,
                group=j // self.group_size,
            )
            for j in range(self.batch)
        ]

    def __call__(self, cursor: int):
        records = self.records(cursor)
        max_len = self.prompt_len + self.turns * self.turn_len + (self.turns - 1) * self.obs_len
        batch, drops, _ = pack_trajectories(
            records, RewardConfig(), PackConfig(max_len=max_len, pad_to=self.pad_to)
        )
        reward = float(np.mean([r["reward"] for r in records]))
        return batch, int(cursor) + 1, {"reward_mean": reward, **drops.as_metrics()}
