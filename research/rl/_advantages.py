"""Advantage estimators, pure functions over [B, T] token arrays aligned with the tokens.

Every estimator has the signature ``fn(rewards, values, mask, discounts, turn_ids, group_ids, cfg)`` and
returns ``(advantages, returns)`` [B, T] fp32, zero off policy tokens (``mask`` = response_mask: 1 for a
policy token, 0 for prompt, observation and padding). ``values[b, t]`` is the critic's value of the prefix
before token t (the state in which token t was chosen); ``discounts`` multiplies ``gamma`` at each policy
token (1 except at a turn's last token under per-turn discounting, see _rewards.py); ``turn_ids`` [B, T]
is the turn of each policy token (-1 elsewhere); ``group_ids`` [B] the rollout group (same prompt),
integers in [0, B).

GAE across observation tokens: the MDP's steps are the policy tokens only. Observation tokens (tool output,
the sandbox's feedback) are part of the environment's transition from the last token of turn k to the
first token of turn k+1, so the recursion jumps over them: for a policy token t whose next policy token is
t' (possibly after an observation),

    delta_t = r_t + gamma_t * V(s_t') - V(s_t),   A_t = delta_t + gamma_t * lam * A_t',

with V = 0 and A = 0 after the last policy token (the episode ends there). ``V(s_t')`` is the value of the
prefix that includes the observation, so the critic does see the feedback; discounting counts policy tokens,
not observation tokens, so a long compiler log does not shrink the return. A reverse scan carries
(V, A) of the next policy token and leaves the carry untouched on every non-policy token.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from kernels_env.client import Registry

from ._config import AdvantageConfig

F32 = jnp.float32
ADVANTAGES = Registry("advantage estimator")


def _reverse_scan(rewards, values, mask, discounts, gamma: float, lam: float):
    """The policy-token-only GAE recursion (module doc); returns advantages [B, T]."""
    m = mask.astype(bool)

    def step(carry, x):
        next_v, next_a = carry
        r, v, keep, d = x
        g = gamma * d
        a = r + g * next_v - v + g * lam * next_a
        return (jnp.where(keep, v, next_v), jnp.where(keep, a, next_a)), jnp.where(keep, a, 0.0)

    zeros = jnp.zeros(rewards.shape[:1], F32)
    xs = tuple(
        jnp.swapaxes(a.astype(F32) if a.dtype != bool else a, 0, 1) for a in (rewards, values, m, discounts)
    )
    _, adv = jax.lax.scan(step, (zeros, zeros), xs, reverse=True)
    return jnp.swapaxes(adv, 0, 1)


def masked_whiten(x, mask, eps: float = 1e-6):
    """(x - mean) / std over the masked entries (population variance), zero elsewhere."""
    m = mask.astype(F32)
    n = jnp.maximum(m.sum(), 1.0)
    mean = (x * m).sum() / n
    var = (((x - mean) * m) ** 2).sum() / n
    return (x - mean) * jax.lax.rsqrt(var + eps) * m


def returns_to_go(rewards, mask, discounts):
    """Sum of later policy-token rewards, each turn boundary multiplying by its discount (gamma = 1)."""
    zeros = jnp.zeros_like(rewards, F32)
    return _reverse_scan(rewards, zeros, mask, discounts, 1.0, 1.0)


@ADVANTAGES.register("gae")
def gae(rewards, values, mask, discounts, turn_ids, group_ids, cfg: AdvantageConfig):
    adv = _reverse_scan(rewards, values, mask, discounts, cfg.gamma, cfg.lam)
    m = mask.astype(F32)
    returns = (adv + values) * m  # the critic's target: TD(lambda) return, taken before whitening
    if cfg.whiten:
        adv = masked_whiten(adv, mask, cfg.eps)
    return adv * m, returns


def _sequence_scores(rewards, mask, discounts):
    """Return-to-go at each row's first policy token (the whole trajectory's return)."""
    rtg = returns_to_go(rewards, mask, discounts)
    m = mask.astype(bool)
    first = jnp.argmax(m, axis=1)
    return jnp.take_along_axis(rtg, first[:, None], axis=1)[:, 0] * m.any(axis=1)


def _group_stats(x, group_ids, valid):
    """Per-row sum, count and sum of squares of ``x`` over its group (``valid`` rows only)."""
    n = x.shape[0]
    v = valid.astype(F32)
    s = jax.ops.segment_sum(x * v, group_ids, num_segments=n)[group_ids]
    c = jax.ops.segment_sum(v, group_ids, num_segments=n)[group_ids]
    q = jax.ops.segment_sum(x * x * v, group_ids, num_segments=n)[group_ids]
    return s, c, q


@ADVANTAGES.register("grpo")
def grpo(rewards, values, mask, discounts, turn_ids, group_ids, cfg: AdvantageConfig):
    """(score - group mean) / (group std + eps), std unbiased (ddof 1) as in verl; a group of one has no
    comparison and gets advantage 0. Every policy token of a row gets the row's advantage."""
    m = mask.astype(F32)
    valid = m.sum(axis=1) > 0
    score = _sequence_scores(rewards, mask, discounts)
    s, c, q = _group_stats(score, group_ids, valid)
    mean = s / jnp.maximum(c, 1.0)
    var = jnp.maximum(q - c * mean**2, 0.0) / jnp.maximum(c - 1.0, 1.0)
    adv = score - mean
    if cfg.norm_by_std:
        adv = adv / (jnp.sqrt(var) + cfg.eps)
    adv = jnp.where((c > 1) & valid, adv, 0.0)
    return adv[:, None] * m, score[:, None] * m


@ADVANTAGES.register("rloo")
def rloo(rewards, values, mask, discounts, turn_ids, group_ids, cfg: AdvantageConfig):
    """score minus the mean score of the group's other rollouts (0 for a group of one)."""
    m = mask.astype(F32)
    valid = m.sum(axis=1) > 0
    score = _sequence_scores(rewards, mask, discounts)
    s, c, _ = _group_stats(score, group_ids, valid)
    adv = jnp.where((c > 1) & valid, score - (s - score) / jnp.maximum(c - 1.0, 1.0), 0.0)
    return adv[:, None] * m, score[:, None] * m


@ADVANTAGES.register("trloo")
def trloo(rewards, values, mask, discounts, turn_ids, group_ids, cfg: AdvantageConfig):
    """Turn-level leave-one-out (Dr.Kernel): a rollout's return from turn k minus the mean return from turn
    k of the group's other rollouts that are still alive at turn k (have a turn k). No other rollout alive:
    advantage 0. Turns at or beyond ``cfg.max_turns`` are an error upstream (pack checks it)."""
    b, _ = rewards.shape
    k = cfg.max_turns
    m = mask.astype(bool)
    rtg = returns_to_go(rewards, mask, discounts)
    turn = jnp.where(m, turn_ids, 0).astype(jnp.int32)
    prev = jnp.pad(turn, ((0, 0), (1, 0)), constant_values=-1)[:, :-1]
    prev_m = jnp.pad(m, ((0, 0), (1, 0)))[:, :-1]
    first = m & ((turn != prev) | ~prev_m)  # the first policy token of each turn
    rows = jnp.arange(b, dtype=jnp.int32)[:, None]
    cell = rows * k + turn  # (row, turn)
    ff = first.astype(F32)
    ret = jax.ops.segment_sum((rtg * ff).ravel(), cell.ravel(), num_segments=b * k)  # [B*K]
    alive = jax.ops.segment_sum(ff.ravel(), cell.ravel(), num_segments=b * k) > 0
    gcell = (group_ids[:, None] * k + jnp.arange(k)[None, :]).ravel()  # (group, turn) of each (row, turn)
    av = alive.astype(F32)
    s = jax.ops.segment_sum(ret * av, gcell, num_segments=b * k)[gcell]
    c = jax.ops.segment_sum(av, gcell, num_segments=b * k)[gcell]
    adv_cell = jnp.where(alive & (c > 1), ret - (s - ret) / jnp.maximum(c - 1.0, 1.0), 0.0)
    adv = adv_cell[cell] * m
    return adv.astype(F32), (ret[cell] * m).astype(F32)


def compute_advantages(rewards, values, mask, discounts, turn_ids, group_ids, cfg: AdvantageConfig):
    """Dispatch on ``cfg.estimator`` (values may be None for the critic-free estimators)."""
    if values is None:
        if cfg.estimator == "gae":
            raise ValueError("the gae estimator needs critic values")
        values = jnp.zeros_like(rewards, F32)
    return ADVANTAGES.get_named(cfg.estimator)(rewards, values, mask, discounts, turn_ids, group_ids, cfg)
