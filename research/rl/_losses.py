"""Per-token losses, KL estimators and aggregations (pure functions of [B, T] arrays).

Aggregation is split into a numerator (summable over micro-batches) and a denominator computed once on the
whole mini-batch, so gradient accumulation gives the full batch's gradient exactly (not a mean of means):

* ``token_mean``: sum(loss * mask) / sum(mask) over the mini-batch (verl's default);
* ``seq_mean_token_mean``: mean over rows of each row's token mean (every trajectory weighs the same);
* ``seq_mean_token_sum``: sum of each row's token losses, averaged over rows (Dr. GRPO's unbiased form).

In a packed batch (several trajectories per row, ``segment_ids``) "row" reads "trajectory":
``SEGMENT_AGGREGATIONS`` holds the same three over segments, equal to the padded batch's up to rounding.

KL estimators of KL(pi || ref) from tokens sampled from pi, with log r = log ref - log pi (Schulman's k1,
k2, k3). As *values* k1 = -log r and k3 = r - log r - 1 are unbiased, k3 with lower variance and never
negative. As *losses* they differ: the gradient of k3 differentiated on samples is
E_pi[(1 - r) grad log pi] = -E_ref[grad log pi] = grad KL(ref || pi): the reverse KL's gradient, a biased
estimate of grad KL(pi || ref) (tests/rl/test_losses.py checks this on a categorical distribution). The
unbiased option is ``k1_reward``: k1 subtracted from the token rewards (detached), so the policy gradient
carries E_pi[(log pi - log ref) grad log pi], the true gradient. ``k3_loss`` is offered because it is what
GRPO recipes use; it is the *biased* choice.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from kernels_env.client import Registry

F32 = jnp.float32
POLICY_LOSSES = Registry("policy loss")
KL_ESTIMATORS = Registry("KL estimator")
AGGREGATIONS = Registry("aggregation")
SEGMENT_AGGREGATIONS = Registry("aggregation over packed segments")
KL_PENALTIES = ("none", "k1_reward", "k3_loss")


# --- policy losses: fn(logp, old_logp, adv, cfg) -> (loss [B, T], clipped [B, T] bool, ratio [B, T]) -----


@POLICY_LOSSES.register("ppo")
def ppo_clip(logp, old_logp, adv, cfg):
    """max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)); with ``dual_clip`` c and A < 0 also <= -A c."""
    ratio = jnp.exp(logp - old_logp)
    pg1 = -adv * ratio
    pg2 = -adv * jnp.clip(ratio, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    loss = jnp.maximum(pg1, pg2)
    clipped = pg2 > pg1
    if cfg.dual_clip is not None:
        if cfg.dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {cfg.dual_clip}")
        bound = -adv * cfg.dual_clip
        dual = (adv < 0) & (loss > bound)
        loss = jnp.where(dual, bound, loss)
        clipped = clipped | dual
    return loss, clipped, ratio


@POLICY_LOSSES.register("reinforce")
def reinforce(logp, old_logp, adv, cfg):
    """-A r without clipping (the importance-weighted policy gradient)."""
    ratio = jnp.exp(logp - old_logp)
    return -adv * ratio, jnp.zeros(ratio.shape, bool), ratio


def value_loss(values, old_values, returns, clip: float | None):
    """0.5 max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2); plain 0.5 (v - R)^2 when clip is None.
    Returns (loss [B, T], clipped [B, T] bool)."""
    plain = (values - returns) ** 2
    if clip is None:
        return 0.5 * plain, jnp.zeros(plain.shape, bool)
    v_clip = old_values + jnp.clip(values - old_values, -clip, clip)
    clipped = (v_clip - returns) ** 2
    return 0.5 * jnp.maximum(plain, clipped), clipped > plain


# --- KL estimators: fn(logp, ref_logp) -> [B, T] -------------------------------------------------------


@KL_ESTIMATORS.register("k1")
def kl_k1(logp, ref_logp):
    return logp - ref_logp


@KL_ESTIMATORS.register("k2")
def kl_k2(logp, ref_logp):
    return 0.5 * (logp - ref_logp) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(logp, ref_logp):
    """r - log r - 1 with log r clamped to [-20, 20] (a single wild token cannot overflow exp)."""
    log_r = jnp.clip(ref_logp - logp, -20.0, 20.0)
    return jnp.exp(log_r) - log_r - 1.0


# --- aggregations: numerator(loss, mask) summed over micro-batches / denominator(mask) of the batch ------


def _rows(mask):
    return (mask.sum(axis=-1) > 0).astype(F32)


AGGREGATIONS.register("token_mean")(
    (lambda loss, mask: (loss * mask).sum(), lambda mask: jnp.maximum(mask.sum(), 1.0))
)
AGGREGATIONS.register("seq_mean_token_mean")(
    (
        lambda loss, mask: ((loss * mask).sum(-1) / jnp.maximum(mask.sum(-1), 1.0)).sum(),
        lambda mask: jnp.maximum(_rows(mask).sum(), 1.0),
    )
)
AGGREGATIONS.register("seq_mean_token_sum")(
    (lambda loss, mask: (loss * mask).sum(), lambda mask: jnp.maximum(_rows(mask).sum(), 1.0))
)


def _segment_counts(mask, seg):
    """(policy tokens of each token's segment [B, T], segments that have policy tokens): a segment is
    (row, segment id), slot row * T + id (ids are < T)."""
    b, t = mask.shape
    key = (jnp.arange(b, dtype=jnp.int32)[:, None] * t + seg.astype(jnp.int32)).reshape(-1)
    per_slot = jax.ops.segment_sum(mask.reshape(-1), key, num_segments=b * t)
    return per_slot[key].reshape(b, t), (per_slot > 0).astype(F32).sum()


SEGMENT_AGGREGATIONS.register("token_mean")(
    (lambda loss, mask, seg: (loss * mask).sum(), lambda mask, seg: jnp.maximum(mask.sum(), 1.0))
)
SEGMENT_AGGREGATIONS.register("seq_mean_token_mean")(
    (
        lambda loss, mask, seg: (loss * mask / jnp.maximum(_segment_counts(mask, seg)[0], 1.0)).sum(),
        lambda mask, seg: jnp.maximum(_segment_counts(mask, seg)[1], 1.0),
    )
)
SEGMENT_AGGREGATIONS.register("seq_mean_token_sum")(
    (
        lambda loss, mask, seg: (loss * mask).sum(),
        lambda mask, seg: jnp.maximum(_segment_counts(mask, seg)[1], 1.0),
    )
)


def numerator(loss, mask, mode: str, segment_ids=None):
    """``mode``'s numerator (summable over micro-batches); per segment when ``segment_ids`` is given."""
    if segment_ids is None:
        return AGGREGATIONS.get_named(mode)[0](loss, mask.astype(F32))
    return SEGMENT_AGGREGATIONS.get_named(mode)[0](loss, mask.astype(F32), segment_ids)


def aggregate(loss, mask, mode: str, denominator=None, segment_ids=None):
    """``mode``'s aggregate of ``loss`` over ``mask``; ``denominator`` from the whole batch when ``loss`` is
    one micro-batch of it."""
    den = denominator_of(mask, mode, segment_ids) if denominator is None else denominator
    return numerator(loss, mask, mode, segment_ids) / den


def denominator_of(mask, mode: str, segment_ids=None):
    if segment_ids is None:
        return AGGREGATIONS.get_named(mode)[1](mask.astype(F32))
    return SEGMENT_AGGREGATIONS.get_named(mode)[1](mask.astype(F32), segment_ids)
