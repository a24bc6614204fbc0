"""Multi-turn KV-cache continuation for :class:`models.Sampler`: keep each row's cache after a turn and
prefill only the new tokens of the next turn (an agent's observation), in a batch with other rows.

Layout. After a call with ``keep_cache=True`` each row keeps a :class:`CacheRow`: its keys/values for every
layer stacked as ``[L, K, S, H]`` with the cached tokens in slots ``[end - len(ids), end)``. The next call
builds one batch cache of length ``P + max_new`` (``P = C + T``: ``C`` the bucket of the longest cached
part, ``T`` the bucket of the longest new part) in which every row's context ends at slot ``P - 1``, like
the left-padded prompts of a fresh prefill: row i's cached keys are shifted on device to
``[P - n_i, P - m_i)`` (``n_i`` context tokens of which ``m_i`` are new), then the window ``[P - T, P)`` is
recomputed from the row's own tokens (its new tokens plus, for rows with fewer than ``T`` new tokens, the
last cached ones, which come out the same) and decoding proceeds exactly as after a prefill. Compilations
are per (batch bucket, C, T, S of the sources, cache length): a handful with bucketed shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np


@dataclass
class CacheRow:
    """One row's KV cache after a turn: ``k``/``v`` [L, K, S, H] with the keys/values of ``ids`` (the
    prompt and every generated token but the last, which was sampled and never fed back) in slots
    ``[end - len(ids), end)``. Pass it back with a prompt that extends ``ids``."""

    k: jax.Array
    v: jax.Array
    end: int
    ids: tuple[int, ...]

    @property
    def length(self) -> int:
        return len(self.ids)

    @property
    def slots(self) -> int:
        return int(self.k.shape[2])


def check_prefix(prompt: list[int], row: CacheRow | None, index: int) -> int:
    """Number of cached tokens of ``prompt`` (0 without a cache); the prompt must extend the cached ids and
    add at least one token (its logits come from the new part)."""
    if row is None:
        return 0
    c = row.length
    if len(prompt) <= c:
        raise ValueError(
            f"prompt {index} has {len(prompt)} tokens but its cache already holds {c}: a continued prompt "
            "must add at least one token"
        )
    if tuple(prompt[:c]) != row.ids:
        j = next(j for j in range(c) if prompt[j] != row.ids[j])
        raise ValueError(
            f"prompt {index} does not extend its cached tokens (first difference at token {j}: "
            f"{prompt[j]} vs cached {row.ids[j]}); re-tokenised history? start a fresh prefill"
        )
    return c


def window(prompts: list[list[int]], cached: list[int], batch: int, t: int, c: int, pad_id: int):
    """Window tokens [B, T], their positions, context lengths [B] and the per-row cache shift [B]."""
    p = c + t
    tokens = np.full((batch, t), pad_id, np.int32)
    positions = np.zeros((batch, t), np.int32)
    lengths = np.zeros((batch,), np.int32)
    for i, x in enumerate(prompts):
        n = len(x)
        w = x[max(0, n - t) :]
        tokens[i, t - len(w) :] = w
        positions[i] = np.maximum(np.arange(n - t, n), 0)
        lengths[i] = n
    return tokens, positions, lengths, p


@jax.jit
def _stack_rows(carry_k: tuple, carry_v: tuple):
    return jnp.stack(carry_k, axis=1), jnp.stack(carry_v, axis=1)  # [B, L, K, S, H]


def split_rows(cache, prompts, responses, kv_start: np.ndarray, prompt_len: int) -> list[CacheRow]:
    """Per-row caches of a finished batch (rows ``i < len(prompts)``)."""
    k, v = _stack_rows(cache.k, cache.v)
    rows = []
    for i, (prompt, resp) in enumerate(zip(prompts, responses)):
        fed = list(resp[:-1]) if resp else []
        end = prompt_len + len(fed)
        ids = tuple(prompt) + tuple(fed)
        assert end - len(ids) == int(kv_start[i]), "cache layout invariant"
        rows.append(CacheRow(k=k[i], v=v[i], end=end, ids=ids))
    return rows


def gather_sources(rows: list[CacheRow | None], batch: int):
    """Stack the rows' caches into [B, L, K, S_src, H] (rows without a cache and batch padding: zeros),
    with the slot after each row's cached tokens."""
    ref = next(r for r in rows if r is not None).k
    s_src = max(r.slots for r in rows if r is not None)
    out_k, out_v, ends = [], [], np.zeros((batch,), np.int32)
    for i in range(batch):
        r = rows[i] if i < len(rows) else None
        if r is None:
            z = jnp.zeros((ref.shape[0], ref.shape[1], s_src, ref.shape[3]), ref.dtype)
            out_k.append(z)
            out_v.append(z)
            continue
        pad = [(0, 0), (0, 0), (0, s_src - r.slots), (0, 0)]
        out_k.append(jnp.pad(r.k, pad) if r.slots < s_src else r.k)
        out_v.append(jnp.pad(r.v, pad) if r.slots < s_src else r.v)
        ends[i] = r.end
    return jnp.stack(out_k), jnp.stack(out_v), ends


def shifted_cache(src, delta, cache_len: int):
    """``src`` [B, L, K, S, H] shifted right by ``delta`` [B] slots (may be negative) into a cache of
    ``cache_len`` slots, as the per-layer tuple the decoder takes ([B, K, cache_len, H] each)."""
    buf = jnp.pad(src, [(0, 0), (0, 0), (0, 0), (cache_len, cache_len), (0, 0)])

    def one(row, d):  # dest slot j holds source slot j - d
        return jax.lax.dynamic_slice_in_dim(row, cache_len - d, cache_len, axis=2)

    out = jax.vmap(one)(buf, delta)
    return tuple(out[:, layer] for layer in range(out.shape[1]))
