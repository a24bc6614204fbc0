"""The learner's pure functions: ``prepare`` (rollout-time log-probs, values, advantages) and the updates
(PPO actor + critic, RFT, value pretraining, and ``actor_update`` on a loss of the caller's: the toy
policy's pretraining), each one optimizer step (``_apply``), the first three with gradient accumulation over
micro-batches. They take graphdefs, optimizers and configs as bound arguments (``functools.partial``) and
are jitted by :class:`research.rl.Learner`.

Micro-batches are strided (micro-batch m holds rows m, m + M, ...): with the batch sharded in contiguous
row blocks over (data, fsdp), every device then holds an equal share of every micro-batch and slicing
needs no communication. Loss numerators are summed over micro-batches and divided by the denominator of
the whole mini-batch (_losses.py), so the accumulated gradient is the full batch's gradient. With
``micro_batch_tokens`` the count follows from the batch's shape (:func:`micro_count`).

A packed batch (``positions`` set, _packing.py) runs the models with its segments; a log-prob or value
whose prefix would cross into the previous trajectory (a segment's first token) is zeroed like entry 0 of
a padded row, and the advantages are computed on the trajectories' own padded layout.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import models

from ._advantages import compute_advantages
from ._batch import RLBatch
from ._config import LearnerConfig
from ._losses import KL_ESTIMATORS, KL_PENALTIES, POLICY_LOSSES, denominator_of, numerator, value_loss
from ._packing import repack, unpack

F32 = jnp.float32
BATCH_AXES = ("data", "fsdp")


class TrainState(NamedTuple):
    actor: Any  # nnx.State of the policy (fp32 master weights), or None
    critic: Any  # nnx.State of the critic, or None
    actor_opt: Any
    critic_opt: Any
    step: jax.Array  # int32: updates taken
    rng: jax.Array  # typed PRNG key (mini-batch shuffling)


def packed(batch) -> dict:
    """The model keyword arguments of ``batch``'s layout: segments and positions when packed, else none."""
    if batch.positions is None:
        return {}
    return {"segment_ids": batch.segment_ids, "positions": batch.positions}


def _shift(a, segment_ids=None):
    """[B, T-1] next-token quantities -> aligned with tokens (entry 0 is 0; so is each segment's first)."""
    a = jnp.pad(a, ((0, 0), (1, 0)))
    if segment_ids is None:
        return a
    same = jnp.pad(segment_ids[:, 1:] == segment_ids[:, :-1], ((0, 0), (1, 0)))
    return jnp.where(same, a, 0.0)


def logprobs(graphdef, params, tokens, cfg: LearnerConfig, *, entropy: bool = False, layout=None):
    """Log-probs of every token given its prefix, aligned with ``tokens`` (entry 0 is 0): [B, T] fp32.
    ``layout``: :func:`packed`'s keywords of a packed batch."""
    layout = layout or {}
    out = models.token_logprobs(
        nnx.merge(graphdef, params),
        tokens,
        chunk_size=cfg.chunk_size,
        temperature=1.0 if cfg.loss.temperature is None else cfg.loss.temperature,
        return_entropy=entropy,
        **layout,
    )
    pad = lambda a: _shift(a, layout.get("segment_ids"))
    return (pad(out[0]), pad(out[1])) if entropy else pad(out)


def values(graphdef, params, tokens, layout=None):
    """V(prefix before token t), aligned with ``tokens`` [B, T] (entry 0 is 0, each segment's first too)."""
    layout = layout or {}
    v = nnx.merge(graphdef, params)(tokens, layout.get("positions"), segment_ids=layout.get("segment_ids"))
    return _shift(v[:, :-1], layout.get("segment_ids"))  # v[:, t]: the prefix up to and including token t


def masked_mean(x, mask):
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def explained_variance(pred, target, mask):
    """1 - Var(target - pred) / Var(target) over masked tokens (1: perfect, 0: no better than the mean)."""
    var = lambda x: masked_mean((x - masked_mean(x, mask)) ** 2, mask)
    return 1.0 - var(target - pred) / jnp.maximum(var(target), 1e-8)


def tis_enabled(cfg: LearnerConfig) -> bool:
    """Whether truncated importance sampling is on (``LossConfig.tis_cap``), the cap checked."""
    cap = cfg.loss.tis_cap
    if cap is None or cap == 0:
        return False
    if not cap > 0:
        raise ValueError(f"loss.tis_cap must be > 0 (or 0 / null: off), got {cap}")
    if cfg.old_logprobs != "recompute":
        raise ValueError(
            f"loss.tis_cap={cap} weighs the gap between the learner's recomputed old log-probs and the "
            f"sampler's: it needs old_logprobs=recompute, got {cfg.old_logprobs!r}"
        )
    return True


def tis_weights(old, sampler, mask, cap: float):
    """(min(exp(old - sampler), cap) [B, T], metrics): the truncated importance weight of each token sampled
    by the sampler's policy (a stale snapshot, or an inference engine's numerics) for the learner's old
    policy. Computed as exp(min(old - sampler, log cap)) so a wild token cannot overflow, and exactly 1 where
    the two log-probs agree. Metrics over policy tokens: ``tis/mean`` (after truncation), ``tis/clipped_frac``
    (tokens whose weight was truncated)."""
    log_w = old - sampler
    log_cap = jnp.log(jnp.asarray(cap, F32))
    w = jnp.exp(jnp.minimum(log_w, log_cap))
    clipped = (log_w > log_cap).astype(F32)
    return w, {"tis/mean": masked_mean(w, mask), "tis/clipped_frac": masked_mean(clipped, mask)}


def prepare(state: TrainState, batch: RLBatch, ref_params, *, actor_def, critic_def, ref_def, cfg):
    """Fill old log-probs, values, reference log-probs, advantages and returns (no gradients)."""
    lc = cfg.loss
    if lc.kl_penalty not in KL_PENALTIES:
        raise ValueError(f"unknown kl_penalty {lc.kl_penalty!r}; known: {KL_PENALTIES}")
    m = batch.response_mask.astype(F32)
    metrics = {}
    old = batch.old_logprobs
    tis = None
    layout = packed(batch)
    if state.actor is not None:
        lp, ent = logprobs(actor_def, state.actor, batch.tokens, cfg, entropy=True, layout=layout)
        metrics["entropy"] = masked_mean(ent, m)
        metrics["logprob_gap_sampler"] = masked_mean(jnp.abs(lp - batch.old_logprobs), m)
        if cfg.old_logprobs == "recompute":
            old = lp
        elif cfg.old_logprobs != "sampler":
            raise ValueError(f"old_logprobs must be recompute or sampler, got {cfg.old_logprobs!r}")
        if tis_enabled(cfg):
            tis, tis_metrics = tis_weights(lp, batch.old_logprobs, m, lc.tis_cap)
            metrics.update(tis_metrics)
    vals = None if state.critic is None else values(critic_def, state.critic, batch.tokens, layout)
    rewards = batch.token_rewards
    ref = None
    if lc.kl_penalty != "none":
        ref = logprobs(ref_def, ref_params, batch.tokens, cfg, layout=layout)
        metrics["kl_ref"] = masked_mean(KL_ESTIMATORS.get_named("k3")(old, ref), m)
        if lc.kl_penalty == "k1_reward":
            rewards = rewards - lc.kl_coef * (old - ref) * m
    adv, ret = _advantages(batch, rewards, vals, m, cfg)
    metrics.update(advantage_mean=masked_mean(adv, m), return_mean=masked_mean(ret, m))
    if vals is not None:
        metrics.update(value_mean=masked_mean(vals, m), explained_variance=explained_variance(vals, ret, m))
    out = batch._replace(
        old_logprobs=old * m,
        values=vals,
        ref_logprobs=ref,
        advantages=adv,
        returns=ret,
        tis_weights=tis,
        segments=None,
    )
    return out, metrics


def _advantages(batch, rewards, vals, m, cfg):
    """The estimator on the padded layout: a packed batch's trajectories are unpacked into rows of their
    own (so GAE, returns and group baselines never cross a trajectory) and the results packed back."""
    args = (rewards, vals, m, batch.token_discounts, batch.turn_ids)
    lay = batch.segments
    if lay is None:
        return compute_advantages(*args, batch.group_ids, cfg.advantage)
    fills = (0.0, 0.0, 0.0, 1.0, -1)
    rows = [None if a is None else unpack(a, lay, f) for a, f in zip(args, fills)]
    adv, ret = compute_advantages(*rows, lay.group_ids, cfg.advantage)
    return repack(adv, lay, m.shape), repack(ret, lay, m.shape)


def micro_count(batch, cfg: LearnerConfig, mesh=None) -> int:
    """Micro-batches per optimizer step: ``cfg.micro_batches``, or with ``cfg.micro_batch_tokens`` the
    fewest whose rows (a divisor of B, a multiple of the row shards) hold at most that many [rows x T]
    token slots; one row per shard at the least."""
    if cfg.micro_batch_tokens is None:
        return cfg.micro_batches
    b, t = batch.tokens.shape
    shards = 1 if mesh is None else mesh.shape["data"] * mesh.shape["fsdp"]
    fits = [r for r in range(1, b + 1) if b % r == 0 and r % shards == 0]
    if not fits:
        raise ValueError(f"batch of {b} rows does not split over {shards} row shards")
    within = [r for r in fits if r * t <= cfg.micro_batch_tokens]
    return b // (max(within) if within else min(fits))


def split_micro(batch, n: int, mesh=None):
    """[B, ...] -> [n, B / n, ...] strided (module doc), kept sharded over the batch axes."""

    def one(x):
        if x is None:
            return None
        b = x.shape[0]
        if b % n:
            raise ValueError(f"batch of {b} rows does not split into {n} micro-batches")
        y = x.reshape(b // n, n, *x.shape[1:]).swapaxes(0, 1)
        if mesh is not None:
            y = jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P(None, BATCH_AXES)))
        return y

    return jax.tree.map(one, batch, is_leaf=lambda x: x is None)


def accumulate(loss_fn, params, micro, n: int):
    """Sum over micro-batches of (grad, aux) of ``loss_fn(params, mb) -> (loss, aux)``."""
    grad_fn = jax.grad(loss_fn, has_aux=True)
    take = lambda i: jax.tree.map(lambda x: x[i], micro)
    if n == 1:
        return grad_fn(params, take(0))
    first = grad_fn(params, take(0))

    def body(acc, mb):
        return jax.tree.map(jnp.add, acc, grad_fn(params, mb)), None

    rest = jax.tree.map(lambda x: x[1:], micro)
    out, _ = jax.lax.scan(body, first, rest)
    return out


def _apply(tx, params, opt, grads):
    updates, opt = tx.update(grads, opt, params)
    return optax.apply_updates(params, updates), opt, optax.tree.norm(grads)


def _numerator(mb, cfg):
    """``num(loss, mask)``: the aggregation's numerator, per trajectory in a packed batch."""
    seg = packed(mb).get("segment_ids")
    return lambda loss, m: numerator(loss, m, cfg.loss.aggregation, seg)


def _actor_loss(params, mb, dens, *, actor_def, cfg):
    lc = cfg.loss
    num = _numerator(mb, cfg)
    m = mb.response_mask.astype(F32)
    need_entropy = lc.entropy_coef != 0.0
    out = logprobs(actor_def, params, mb.tokens, cfg, entropy=need_entropy, layout=packed(mb))
    lp, ent = out if need_entropy else (out, None)
    pg, clipped, ratio = POLICY_LOSSES.get_named(lc.policy_loss)(lp, mb.old_logprobs, mb.advantages, lc)
    if mb.tis_weights is not None:  # truncated importance sampling (prepare): a constant per token
        pg = pg * mb.tis_weights
    pg_loss = num(pg, m) / dens["agg"]
    loss = pg_loss
    tok = lambda x: (x * m).sum() / dens["tokens"]  # token-mean metrics, summable over micro-batches
    aux = {
        "pg_loss": pg_loss,
        "clip_frac": tok(clipped.astype(F32)),
        "ppo_kl": tok(KL_ESTIMATORS.get_named("k3")(lp, mb.old_logprobs)),
        "ratio_mean": tok(ratio),
    }
    if need_entropy:
        ent_term = num(ent, m) / dens["agg"]
        loss = loss - lc.entropy_coef * ent_term
        aux["entropy_bonus"] = ent_term
    if lc.kl_penalty == "k3_loss":
        kl_term = num(KL_ESTIMATORS.get_named("k3")(lp, mb.ref_logprobs), m) / dens["agg"]
        loss = loss + lc.kl_coef * kl_term
        aux["kl_loss"] = kl_term
    aux["actor_loss"] = loss
    return loss, aux


def _critic_loss(params, mb, dens, *, critic_def, cfg):
    num = _numerator(mb, cfg)
    m = mb.response_mask.astype(F32)
    v = values(critic_def, params, mb.tokens, packed(mb))
    vl, clipped = value_loss(v, mb.values, mb.returns, cfg.loss.value_clip)
    loss = num(vl, m) / dens["agg"]
    return loss, {"value_loss": loss, "value_clip_frac": (clipped * m).sum() / dens["tokens"]}


def _rft_loss(params, mb, dens, *, actor_def, cfg):
    num = _numerator(mb, cfg)
    m = mb.response_mask.astype(F32)
    lp = logprobs(actor_def, params, mb.tokens, cfg, layout=packed(mb))
    loss = num(-lp, m) / dens["agg"]
    return loss, {"nll": loss, "nll_token_mean": (-lp * m).sum() / dens["tokens"]}


def _dens(batch, cfg):
    m = batch.response_mask.astype(F32)
    seg = packed(batch).get("segment_ids")
    return {"agg": denominator_of(m, cfg.loss.aggregation, seg), "tokens": jnp.maximum(m.sum(), 1.0)}


def ppo_gradients(state, batch, *, actor_def, critic_def, cfg, mesh=None):
    """Accumulated (actor grads, actor metrics, critic grads, critic metrics) of a prepared mini-batch."""
    n = micro_count(batch, cfg, mesh)
    dens = _dens(batch, cfg)
    micro = split_micro(batch, n, mesh)
    a_grads, a_metrics = accumulate(
        lambda p, mb: _actor_loss(p, mb, dens, actor_def=actor_def, cfg=cfg), state.actor, micro, n
    )
    c_grads, c_metrics = None, {}
    if state.critic is not None:
        c_grads, c_metrics = accumulate(
            lambda p, mb: _critic_loss(p, mb, dens, critic_def=critic_def, cfg=cfg), state.critic, micro, n
        )
    return a_grads, a_metrics, c_grads, c_metrics


def ppo_update(state, batch, *, actor_def, critic_def, actor_tx, critic_tx, cfg, mesh=None):
    """One optimizer step of the actor (clipped surrogate) and of the critic (clipped value loss) on a
    prepared mini-batch."""
    a_grads, metrics, c_grads, c_metrics = ppo_gradients(
        state, batch, actor_def=actor_def, critic_def=critic_def, cfg=cfg, mesh=mesh
    )
    actor, actor_opt, metrics["actor_grad_norm"] = _apply(actor_tx, state.actor, state.actor_opt, a_grads)
    critic, critic_opt = state.critic, state.critic_opt
    if c_grads is not None:
        critic, critic_opt, c_metrics["critic_grad_norm"] = _apply(
            critic_tx, state.critic, state.critic_opt, c_grads
        )
        metrics.update(c_metrics)
    new = state._replace(
        actor=actor, critic=critic, actor_opt=actor_opt, critic_opt=critic_opt, step=state.step + 1
    )
    return new, metrics


def _one_update(part: str, state, batch, loss, tx, cfg, mesh):
    """One optimizer step of ``part`` alone (``actor`` or ``critic``) on ``loss(params, mb, dens)``,
    accumulated over micro-batches; metrics are the loss's and ``<part>_grad_norm``."""
    n = micro_count(batch, cfg, mesh)
    dens = _dens(batch, cfg)
    params, opt = getattr(state, part), getattr(state, f"{part}_opt")
    grads, metrics = accumulate(lambda p, mb: loss(p, mb, dens), params, split_micro(batch, n, mesh), n)
    params, opt, metrics[f"{part}_grad_norm"] = _apply(tx, params, opt, grads)
    return state._replace(**{part: params, f"{part}_opt": opt}, step=state.step + 1), metrics


def rft_update(state, batch, *, actor_def, actor_tx, cfg, mesh=None):
    """One optimizer step of the actor on the NLL of policy tokens only (observation tokens masked)."""
    loss = functools.partial(_rft_loss, actor_def=actor_def, cfg=cfg)
    return _one_update("actor", state, batch, loss, actor_tx, cfg, mesh)


def actor_update(state, batch, *, loss_fn, actor_def, actor_tx):
    """One optimizer step of the actor on ``loss_fn(model, batch) -> (loss, metrics)`` (``batch``: any
    pytree of the caller's); metrics are ``loss`` and the loss's own."""

    def objective(params):
        loss, aux = loss_fn(nnx.merge(actor_def, params), batch)
        return loss, {"loss": loss, **aux}

    grads, metrics = jax.grad(objective, has_aux=True)(state.actor)
    actor, actor_opt, _ = _apply(actor_tx, state.actor, state.actor_opt, grads)
    return state._replace(actor=actor, actor_opt=actor_opt, step=state.step + 1), metrics


def value_update(state, batch, *, critic_def, critic_tx, cfg, mesh=None):
    """One optimizer step of the critic towards the prepared batch's GAE returns (the policy is frozen)."""
    loss = functools.partial(_critic_loss, critic_def=critic_def, cfg=cfg)
    return _one_update("critic", state, batch, loss, critic_tx, cfg, mesh)
