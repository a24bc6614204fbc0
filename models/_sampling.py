"""Pure, jittable next-token selection: temperature, top-k, top-p (nucleus), greedy.

Semantics follow transformers' logits warpers (temperature, then top-k, then top-p on the renormalised
distribution), with ties kept together:
  * top-k keeps every token whose logit is >= the k-th largest logit;
  * top-p keeps every token whose probability is >= tau, where tau is the probability of the last token of
    the smallest prefix of the descending-sorted distribution whose mass reaches ``top_p``.
Top-p first looks for the nucleus among the ``candidates`` most likely tokens (one ``lax.top_k``) and only
sorts the whole vocabulary when some row's nucleus is larger, so the common case never sorts 150k logits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

NEG_INF = -jnp.inf


def top_k_mask(logits, k: int):
    """Boolean keep-mask of top-k (static ``k``; ties with the k-th value are kept)."""
    if k <= 0 or k >= logits.shape[-1]:
        return jnp.ones(logits.shape, bool)
    kth = jax.lax.top_k(logits, k)[0][..., -1:]
    return logits >= kth


def _nucleus_threshold(sorted_probs, top_p):
    """tau per row from probabilities sorted in descending order [B, M]; top_p [B, 1]."""
    exclusive = jnp.cumsum(sorted_probs, axis=-1) - sorted_probs
    count = jnp.sum(exclusive < top_p, axis=-1, keepdims=True)  # >= 1 because exclusive[0] == 0 < top_p
    return jnp.take_along_axis(sorted_probs, count - 1, axis=-1)


def top_p_mask(logits, top_p, candidates: int = 256):
    """Boolean keep-mask of nucleus sampling over (already temperature-scaled, maybe top-k-masked) logits.
    ``top_p``: scalar or [B]; 1.0 keeps everything."""
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    top_p = jnp.broadcast_to(jnp.asarray(top_p, jnp.float32).reshape(-1, 1), (probs.shape[0], 1))
    m = min(candidates, probs.shape[-1])
    cand = jax.lax.top_k(probs, m)[0]
    covered = jnp.all(jnp.sum(cand, axis=-1, keepdims=True) >= top_p)

    def full(_):
        return _nucleus_threshold(-jnp.sort(-probs, axis=-1), top_p)

    tau = jax.lax.cond(covered, lambda _: _nucleus_threshold(cand, top_p), full, None)
    return (probs >= tau) | (top_p >= 1.0)


def sample_tokens(
    logits, key, *, temperature, top_p, greedy: bool, top_k: int, use_top_p: bool, candidates: int = 256
):
    """Pick next tokens from fp32 logits [B, V].

    Returns ``(tokens [B] int32, logprobs [B] fp32)`` where the log-prob is that of the chosen token under
    the temperature-scaled, unfiltered distribution ``log_softmax(logits / temperature)`` (temperature 1 when
    greedy): what a trainer recomputes with :func:`models.token_logprobs` at the same temperature."""
    logits = logits.astype(jnp.float32)
    if greedy:
        scaled = logits
        tokens = jnp.argmax(logits, axis=-1)
    else:
        scaled = logits / jnp.asarray(temperature, jnp.float32)
        keep = top_k_mask(scaled, top_k)
        filtered = jnp.where(keep, scaled, NEG_INF)
        if use_top_p:
            filtered = jnp.where(top_p_mask(filtered, top_p, candidates), filtered, NEG_INF)
        tokens = jax.random.categorical(key, filtered, axis=-1)
    tokens = tokens.astype(jnp.int32)
    chosen = jnp.take_along_axis(scaled, tokens[:, None], axis=-1)[:, 0]
    return tokens, chosen - jax.nn.logsumexp(scaled, axis=-1)
