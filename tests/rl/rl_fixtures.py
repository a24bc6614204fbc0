"""Tiny models and batches shared by the rl tests (and the subprocess scripts)."""

from __future__ import annotations

import models
from research import rl


def tiny_cfg(**kw):
    base = dict(
        vocab_size=128,
        num_layers=2,
        hidden_size=32,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        intermediate_size=64,
        compute_dtype="float32",
    )
    base.update(kw)
    return models.tiny_config(**base)


def tiny_models(seed: int = 0, **kw):
    actor = models.init_model(tiny_cfg(**kw), seed=seed)
    return actor, models.Critic.from_policy(actor, seed=seed + 1)


def tiny_source(**kw):
    base = dict(vocab=128, batch=8, group_size=2, prompt_len=5, turn_len=4, obs_len=3, turns=2, pad_to=8)
    base.update(kw)
    return rl.SyntheticSource(**base)
