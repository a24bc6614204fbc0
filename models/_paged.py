"""Paged KV cache pieces of :class:`models.Engine`: the page pool, its host-side allocator, the paged forward
(prefill windows and decode steps), page copies (prefix sharing) and per-row token selection.

Layout. Per layer the pool holds keys and values ``[num_pages + 1, K, page_size, H]``; page ``num_pages`` is
the *trash* page: writes of padding positions, of finished or empty slots and of positions past a slot's
reservation go there and it is never read unmasked. A slot's page table ``[max_pages]`` maps logical page
``pos // page_size`` to a physical page (the trash page where nothing is allocated). Token ``pos`` of a
sequence sits at logical position ``pos`` (no left padding), so its RoPE position is ``pos`` and the causal
mask of a query at ``pos`` is ``slot <= pos``. Attention gathers the slot's pages into a contiguous
``[B, K, max_pages * page_size, H]`` view per layer and runs the same masked attention as the Sampler's XLA
path (``models._layers.cached_attention``); a paged attention kernel that reads pages in place is the
follow-up for long contexts on a GPU.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._layers import cached_attention, rms_norm, rope_inv_freq
from ._sampling import top_k_mask, top_p_mask

F32 = jnp.float32


class PageAllocator:
    """Free list of physical pages (host side). Pages are handed out whole and returned whole."""

    def __init__(self, num_pages: int):
        self.num_pages = num_pages
        self._free = list(range(num_pages - 1, -1, -1))  # pop() hands out low pages first

    @property
    def free(self) -> int:
        return len(self._free)

    def take(self, n: int) -> list[int]:
        if n > len(self._free):
            raise RuntimeError(f"page pool exhausted: {n} pages wanted, {len(self._free)} free")
        return [self._free.pop() for _ in range(n)]

    def give(self, pages) -> None:
        self._free.extend(pages)


def pages_for(tokens: int, page_size: int) -> int:
    return -(-tokens // page_size)


def empty_pool(cfg, num_pages: int, page_size: int):
    """(k, v): per-layer tuples of zero pages [num_pages + 1, K, page_size, H] (the last: the trash)."""
    shape = (num_pages + 1, cfg.num_kv_heads, page_size, cfg.head_dim)
    dt = cfg.compute_jnp_dtype
    return (
        tuple(jnp.zeros(shape, dt) for _ in range(cfg.num_layers)),
        tuple(jnp.zeros(shape, dt) for _ in range(cfg.num_layers)),
    )


def paged_forward(model, tokens, positions, write, pool, page_table, weights=None):
    """Run ``tokens`` [B, T] at ``positions`` [B, T] against each row's pages and write their keys/values.

    ``write`` [B, T] bool: positions whose keys/values are stored (False: the trash page). Queries attend to
    every logical slot ``<= position`` of their row. ``weights``: ``model.model.decode_weights()`` made once
    by a caller that runs many steps. Returns the final hidden states [B, T, D] and the pool.
    """
    cfg = model.config
    pool_k, pool_v = pool
    trash = pool_k[0].shape[0] - 1
    ps = pool_k[0].shape[2]
    b, t = tokens.shape
    logical = jnp.clip(positions // ps, 0, page_table.shape[1] - 1)
    page = jnp.where(write, jnp.take_along_axis(page_table, logical, axis=1), trash)
    off = positions % ps
    span = page_table.shape[1] * ps
    mask = jnp.arange(span)[None, None, :] <= positions[:, :, None]  # [B, T, S]
    inv_freq = rope_inv_freq(cfg)
    blocks, fused = model.model.decode_weights() if weights is None else weights
    x = model.model.embed_tokens(tokens)
    new_k, new_v = [], []
    for blk, fq, pk, pv in zip(blocks, fused, pool_k, pool_v):
        q, k, v = blk.project_qkv(x, positions, inv_freq, fq)
        pk = pk.at[page, :, off].set(k.astype(pk.dtype))  # [B, T] indices around a slice: [B, T, K, H]
        pv = pv.at[page, :, off].set(v.astype(pv.dtype))
        kc = _gather(pk, page_table)
        vc = _gather(pv, page_table)
        x = blk._residual_mlp(x, cached_attention(q, kc, vc, mask))
        new_k.append(pk)
        new_v.append(pv)
    hidden = rms_norm(x, model.model.final_norm[...], cfg.rms_norm_eps)
    return hidden, (tuple(new_k), tuple(new_v))


def _gather(pages, page_table):
    """[P, K, ps, H] pages of each row's table [B, M] as one contiguous cache [B, K, M * ps, H]."""
    g = pages[page_table]  # [B, M, K, ps, H]
    b, m, k, ps, h = g.shape
    return g.transpose(0, 2, 1, 3, 4).reshape(b, k, m * ps, h)


def copy_pages(pool, src, dst):
    """Copy physical pages ``src`` [N] to ``dst`` [N] in every layer (padding pairs: trash to trash)."""
    pool_k, pool_v = pool
    return (
        tuple(p.at[dst].set(p[src]) for p in pool_k),
        tuple(p.at[dst].set(p[src]) for p in pool_v),
    )


def pick_tokens(
    logits, keydata, index, temperature, top_p, greedy, *, top_k, use_top_p, candidates, all_greedy
):
    """Next tokens and their log-probs from fp32 logits [B, V], each row with its own settings and key.

    Row b's draw uses ``fold_in(key_b, index_b)`` (its own stream: the same whichever slot or batch it runs
    in). Greedy rows take the argmax under ``log_softmax(logits)``; sampled rows follow
    :func:`models.sample_tokens` (temperature, top-k, top-p; log-prob under the unfiltered
    ``log_softmax(logits / temperature)``)."""
    logits = logits.astype(F32)
    g_tok = jnp.argmax(logits, axis=-1).astype(jnp.int32)
    if all_greedy:
        tok, scaled = g_tok, logits
    else:
        t = jnp.where(greedy, 1.0, temperature).astype(F32)[:, None]
        scaled = logits / t
        filtered = jnp.where(top_k_mask(scaled, top_k), scaled, -jnp.inf)
        if use_top_p:
            keep = top_p_mask(filtered, jnp.where(greedy, 1.0, top_p), candidates)
            filtered = jnp.where(keep, filtered, -jnp.inf)

        def noise(kd, i):
            key = jax.random.fold_in(jax.random.wrap_key_data(kd), i)
            return jax.random.gumbel(key, logits.shape[-1:], F32)

        g = jax.vmap(noise)(keydata, index)  # Gumbel-max: a categorical draw per row with its own key
        tok = jnp.where(greedy, g_tok, jnp.argmax(filtered + g, axis=-1).astype(jnp.int32))
    chosen = jnp.take_along_axis(scaled, tok[:, None], axis=-1)[:, 0]
    return tok, chosen - jax.nn.logsumexp(scaled, axis=-1)


def decode_segment(model, pool, args, static):
    """Up to ``static[0]`` decode steps of every slot that is not done (a ``lax.while_loop`` that exits once
    all are done). ``args``: the slot table (``models._slots.SlotTable.device_args``). Returns (segment
    tokens [B, N], their log-probs, tokens per slot, steps run, active slot-steps) and the pool."""
    n_steps, top_k, use_top_p, candidates, all_greedy = static
    b = args["last"].shape[0]
    weights = model.model.decode_weights()  # per-layer views and fused q/k/v, once per segment

    def step(carry):
        i, pool, last, length, gen, done, toks, lps, active_sum = carry
        active = ~done
        hidden, pool = paged_forward(
            model, last[:, None], length[:, None], active[:, None], pool, args["table"], weights
        )
        tok, lp = pick_tokens(
            model.logits(hidden[:, 0]),
            args["keydata"],
            gen,
            args["temperature"],
            args["top_p"],
            args["greedy"],
            top_k=top_k,
            use_top_p=use_top_p,
            candidates=candidates,
            all_greedy=all_greedy,
        )
        eos = jnp.any(tok[:, None] == args["eos"], axis=-1)
        toks = toks.at[:, i].set(jnp.where(active, tok, 0))
        lps = lps.at[:, i].set(jnp.where(active, lp, 0.0))
        gen = gen + active
        new_done = done | (active & (eos | (gen >= args["max_new"])))
        return (
            i + 1,
            pool,
            jnp.where(active, tok, last),
            length + active,
            gen,
            new_done,
            toks,
            lps,
            active_sum + jnp.sum(active),
        )

    def running(carry):
        return (carry[0] < n_steps) & ~jnp.all(carry[5])

    init = (
        jnp.int32(0),
        pool,
        args["last"],
        args["length"],
        args["gen"],
        args["done"],
        jnp.zeros((b, n_steps), jnp.int32),
        jnp.zeros((b, n_steps), jnp.float32),
        jnp.int32(0),
    )
    i, pool, _, _, gen, _, toks, lps, active_sum = jax.lax.while_loop(running, step, init)
    return (toks, lps, gen - args["gen"], i, active_sum), pool


def prefill_batch(news, tables, batch: int, t: int, trash: int):
    """Host arrays of a prefill call: ``news`` [(tokens, start)] per row, each row's page table; rows padded
    to ``batch`` (trash tables) and windows to ``t`` (positions past a row's tokens write to the trash page).
    Returns (tokens, positions, write, page tables, index of each row's last token)."""
    tokens = np.zeros((batch, t), np.int32)
    positions = np.zeros((batch, t), np.int32)
    write = np.zeros((batch, t), bool)
    last = np.zeros((batch,), np.int32)
    table = np.full((batch, tables.shape[1]), trash, np.int32)
    for i, (x, start) in enumerate(news):
        tokens[i, : len(x)] = x
        positions[i] = start + np.arange(t)
        write[i, : len(x)] = True
        last[i] = len(x) - 1
        table[i] = tables[i]
    return tokens, positions, write, table, last
