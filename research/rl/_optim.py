"""Optax AdamW with global-norm clipping and a learning-rate schedule, from an OptimConfig."""

from __future__ import annotations

import optax

from ._config import OptimConfig


def learning_rate(cfg: OptimConfig):
    """Linear warmup from 0 over ``warmup_steps``, then constant, cosine or linear decay to
    ``lr * min_lr_ratio`` at ``total_steps``."""
    decay_steps = max(cfg.total_steps - cfg.warmup_steps, 1)
    end = cfg.lr * cfg.min_lr_ratio
    if cfg.schedule == "constant":
        after = optax.constant_schedule(cfg.lr)
    elif cfg.schedule == "cosine":
        after = optax.cosine_decay_schedule(cfg.lr, decay_steps, alpha=cfg.min_lr_ratio)
    elif cfg.schedule == "linear":
        after = optax.linear_schedule(cfg.lr, end, decay_steps)
    else:
        raise ValueError(f"unknown schedule {cfg.schedule!r}; known: constant, cosine, linear")
    if cfg.warmup_steps <= 0:
        return after
    warm = optax.linear_schedule(0.0, cfg.lr, cfg.warmup_steps)
    return optax.join_schedules([warm, after], [cfg.warmup_steps])


def make_optimizer(cfg: OptimConfig) -> optax.GradientTransformation:
    adamw = optax.adamw(learning_rate(cfg), b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay)
    if cfg.max_grad_norm is None:
        return adamw
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), adamw)
