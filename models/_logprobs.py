"""Per-token log-probabilities (and entropies) for training, chunked over tokens.

The unembedding is applied to ``chunk_size`` tokens at a time inside a ``lax.scan``, so at most
[chunk_size, V] fp32 logits exist at once in the forward pass and in the backward pass (the logits of a
chunk are recomputed there), never the whole [B, T, V].

Log-probs alone go through a fused custom VJP per chunk (forward: one product, log-sum-exp, gather; backward:
one product recomputing the logits, the softmax gradient in one pass, two bf16 products with fp32
accumulation; the unembedding gradient is produced in its own dtype, fp32 for master weights). With
entropies a generic rematerialised chunk is differentiated instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._layers import unembed

F32 = jnp.float32


@jax.custom_vjp
def _chunk_logprobs(h, w, y, inv_t):
    """log_softmax(h @ w.T * inv_t)[y] in fp32; h [C, D] compute dtype, w [V, D] any float dtype."""
    return _chunk_forward(h, w, y, inv_t)[0]


def _chunk_forward(h, w, y, inv_t):
    z = jnp.einsum("cd,vd->cv", h, w.astype(h.dtype), preferred_element_type=F32) * inv_t
    lse = jax.nn.logsumexp(z, axis=-1)
    return jnp.take_along_axis(z, y[:, None], axis=-1)[:, 0] - lse, lse


def _chunk_fwd(h, w, y, inv_t):
    lp, lse = _chunk_forward(h, w, y, inv_t)
    return lp, (h, w, y, inv_t, lse)


def _chunk_bwd(res, g):
    h, w, y, inv_t, lse = res
    w16 = w.astype(h.dtype)
    z = jnp.einsum("cd,vd->cv", h, w16, preferred_element_type=F32) * inv_t
    onehot = jnp.arange(z.shape[-1], dtype=jnp.int32)[None, :] == y[:, None]
    dz = ((onehot.astype(F32) - jnp.exp(z - lse[:, None])) * (g * inv_t)[:, None]).astype(h.dtype)
    d_h = jnp.einsum("cv,vd->cd", dz, w16, preferred_element_type=F32).astype(h.dtype)
    d_w = jnp.einsum("cv,cd->vd", dz, h, preferred_element_type=F32).astype(w.dtype)
    # Not differentiated: the integer targets and the temperature.
    return d_h, d_w, np.zeros(y.shape, jax.dtypes.float0), jnp.zeros_like(inv_t)


_chunk_logprobs.defvjp(_chunk_fwd, _chunk_bwd)


def logprobs_from_hidden(
    hidden,
    unembedding,
    targets,
    *,
    temperature=1.0,
    chunk_size: int = 1024,
    compute_dtype=jnp.bfloat16,
    return_entropy: bool = False,
):
    """log softmax(hidden @ unembedding.T / temperature)[targets] in fp32.

    hidden [B, T, D]; unembedding [V, D] (kept in its own dtype across chunks so its gradient accumulates
    at that precision); targets [B, T] int. Returns [B, T] (and the entropy [B, T] if asked)."""
    b, t, d = hidden.shape
    n = b * t
    chunk = max(1, min(chunk_size, n))
    n_chunks = -(-n // chunk)
    pad = n_chunks * chunk - n
    h = jnp.pad(hidden.reshape(n, d), ((0, pad), (0, 0))).reshape(n_chunks, chunk, d)
    y = jnp.pad(targets.reshape(n).astype(jnp.int32), (0, pad)).reshape(n_chunks, chunk)
    inv_t = 1.0 / jnp.asarray(temperature, F32)

    @jax.checkpoint
    def one_with_entropy(h_c, y_c):
        logits = unembed(h_c.astype(compute_dtype), unembedding.astype(compute_dtype)) * inv_t
        lse = jax.nn.logsumexp(logits, axis=-1)
        lp = jnp.take_along_axis(logits, y_c[:, None], axis=-1)[:, 0] - lse
        probs = jnp.exp(logits - lse[:, None])
        return lp, lse - jnp.sum(probs * logits, axis=-1)

    def body(_, xs):
        h_c, y_c = xs
        if return_entropy:
            return None, one_with_entropy(h_c, y_c)
        return None, (_chunk_logprobs(h_c.astype(compute_dtype), unembedding, y_c, inv_t), None)

    _, (lp, ent) = jax.lax.scan(body, None, (h, y))
    lp = lp.reshape(-1)[:n].reshape(b, t)
    if return_entropy:
        return lp, ent.reshape(-1)[:n].reshape(b, t)
    return lp


def token_logprobs(
    model,
    tokens,
    targets=None,
    *,
    attention_mask=None,
    positions=None,
    temperature=1.0,
    chunk_size: int = 1024,
    return_entropy: bool = False,
    segment_ids=None,
):
    """Log-probs (fp32) of ``targets`` under ``model`` run on ``tokens`` [B, T].

    ``targets`` [B, T]: the token each position predicts. None: next-token targets, i.e. the log-prob of
    ``tokens[:, 1:]`` given the prefix, shape [B, T-1]. ``segment_ids``: packed rows (see ``Decoder``); a
    next-token target across a segment boundary is then meaningless and left to the caller to mask. Never
    materialises [B, T, V] logits in fp32."""
    kw = {} if segment_ids is None else {"segment_ids": segment_ids}  # models without it keep working
    hidden = model.hidden_states(tokens, positions, attention_mask, **kw)
    if targets is None:
        hidden, targets = hidden[:, :-1], tokens[:, 1:]
    return logprobs_from_hidden(
        hidden,
        model.unembedding(),
        targets,
        temperature=temperature,
        chunk_size=chunk_size,
        compute_dtype=model.config.compute_jnp_dtype,
        return_entropy=return_entropy,
    )
