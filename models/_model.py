"""The decoder backbone and the causal language model (policy).

Layers are stored stacked (every block parameter has a leading ``num_layers`` axis) so the full-sequence
forward can ``lax.scan`` over them (compile time independent of depth) and sharding rules see one array per
weight kind. The cached decode path runs the layers unrolled over per-layer views made once per call, so a
decode step has no per-layer dynamic slicing of weights.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ._config import ModelConfig
from ._decode import pallas_decode_attention
from ._fused_decode import rope_cos_sin
from ._layers import Block, cached_attention, rms_norm, rope_inv_freq, unembed

F32 = jnp.float32

_REMAT = {
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "save_attn": jax.checkpoint_policies.save_only_these_names("attn_out"),
}


class KVCache(NamedTuple):
    """Per-layer key and value caches, each [B, num_kv_heads, length, head_dim]."""

    k: tuple
    v: tuple

    @staticmethod
    def zeros(cfg: ModelConfig, batch: int, length: int, dtype=None) -> KVCache:
        dtype = dtype or cfg.compute_jnp_dtype
        shape = (batch, cfg.num_kv_heads, length, cfg.head_dim)
        z = tuple(jnp.zeros(shape, dtype) for _ in range(cfg.num_layers))
        return KVCache(z, tuple(jnp.zeros(shape, dtype) for _ in range(cfg.num_layers)))

    @property
    def length(self) -> int:
        return self.k[0].shape[2]


def default_positions(tokens, attention_mask=None):
    """Positions 0.. per row; with a padding mask, real tokens count from 0 (left padding gets position 0)."""
    if attention_mask is None:
        return jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.int32), tokens.shape)
    return jnp.maximum(jnp.cumsum(attention_mask.astype(jnp.int32), axis=1) - 1, 0)


def _stacked_blocks(cfg: ModelConfig, rngs: nnx.Rngs) -> Block:
    @nnx.split_rngs(splits=cfg.num_layers)
    @nnx.vmap(in_axes=(0,), out_axes=0)
    def make(rngs):
        return Block(cfg, rngs=rngs)

    return make(rngs)


class Decoder(nnx.Module):
    """Token embedding, ``num_layers`` stacked blocks, final RMSNorm. Returns hidden states [B, T, D]."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.config = cfg
        init = nnx.initializers.normal(cfg.initializer_range)
        self.embed = nnx.Param(init(rngs.params(), (cfg.vocab_size, cfg.hidden_size), cfg.param_jnp_dtype))
        self.layers = _stacked_blocks(cfg, rngs)
        self.final_norm = nnx.Param(jnp.ones((cfg.hidden_size,), cfg.param_jnp_dtype))

    def embed_tokens(self, tokens):
        return jnp.take(self.embed[...], tokens, axis=0).astype(self.config.compute_jnp_dtype)

    def __call__(
        self, tokens, positions=None, attention_mask=None, *, return_kv: bool = False, segment_ids=None
    ):
        """Full-sequence causal forward. ``attention_mask`` [B, T] (1 = real token) masks padding keys;
        ``return_kv`` also returns the stacked keys and values [L, B, T, K, H] (for prefill);
        ``segment_ids`` [B, T] packs several sequences in a row (attention stays within a segment; pass
        ``positions`` restarting at 0 per segment)."""
        cfg = self.config
        if positions is None:
            positions = default_positions(tokens, attention_mask)
        key_mask = None if attention_mask is None else attention_mask.astype(bool)
        inv_freq = rope_inv_freq(cfg)
        graphdef, state = nnx.split(self.layers)

        def body(x, layer_state):
            x, kv = nnx.merge(graphdef, layer_state)(x, positions, inv_freq, key_mask, segment_ids)
            return x, (kv if return_kv else None)

        if cfg.remat != "none":
            body = jax.checkpoint(body, policy=_REMAT[cfg.remat], prevent_cse=not cfg.scan_layers)
        x = self.embed_tokens(tokens)
        if cfg.scan_layers:
            x, kvs = jax.lax.scan(body, x, state)
        else:
            outs = []
            for i in range(cfg.num_layers):
                x, kv = body(x, jax.tree.map(lambda a, i=i: a[i], state))
                outs.append(kv)
            kvs = jax.tree.map(lambda *a: jnp.stack(a), *outs) if return_kv else None
        x = rms_norm(x, self.final_norm[...], cfg.rms_norm_eps)
        return (x, kvs) if return_kv else x

    def decode_weights(self):
        """(per-layer block views, per-layer fused q/k/v weights): what a decode loop makes once."""
        blocks = self.layer_list()
        return blocks, [blk.fused_qkv() for blk in blocks]

    def layer_list(self) -> list[Block]:
        """Per-layer views of the stacked blocks (slices made once, e.g. before a decode loop)."""
        graphdef, state = nnx.split(self.layers)
        return [
            nnx.merge(graphdef, jax.tree.map(lambda a, i=i: a[i], state))
            for i in range(self.config.num_layers)
        ]

    def decode(
        self,
        tokens,
        cache: KVCache,
        index,
        positions=None,
        kv_start=None,
        *,
        blocks=None,
        fused=None,
        attention: str = "xla",
    ):
        """Run new tokens [B, T] at cache slots ``index``..``index+T-1`` against the cache.

        ``kv_start`` [B]: first valid cache slot per row (left padding), default 0. ``positions`` default to
        ``index - kv_start + arange(T)``. ``blocks`` / ``fused``: per-layer views and fused q/k/v weights
        made once by a caller that decodes many steps (see :meth:`decode_weights`). ``attention``: ``xla``
        (masked attention over the whole cache), ``pallas`` (T == 1; a flash-decoding kernel over the
        filled slots) or ``fused`` (T == 1; RoPE, cache append and attention in one kernel per layer); the
        last two need a cache length that is a multiple of 64 (see ``models._decode``). Returns hidden
        states [B, T, D] and the updated cache."""
        cfg = self.config
        b, t = tokens.shape
        kv_start = jnp.zeros((b,), jnp.int32) if kv_start is None else kv_start
        offsets = jnp.arange(t, dtype=jnp.int32)
        if positions is None:
            positions = (index - kv_start)[:, None] + offsets[None]
        if attention == "fused":
            return self._decode_fused(tokens, cache, index, positions, kv_start, blocks, fused)
        if attention == "pallas":
            kv_len = jnp.broadcast_to(jnp.asarray(index + t, jnp.int32), (b,))
            attend = functools.partial(pallas_decode_attention, kv_start=kv_start, kv_len=kv_len)
        elif attention == "xla":
            slots = jnp.arange(cache.length, dtype=jnp.int32)
            mask = (slots[None, None] >= kv_start[:, None, None]) & (
                slots[None, None] <= index + offsets[None, :, None]
            )
            attend = functools.partial(cached_attention, mask=mask)
        else:
            raise ValueError(f"decode attention must be 'xla', 'pallas' or 'fused', got {attention!r}")
        inv_freq = rope_inv_freq(cfg)
        blocks = self.layer_list() if blocks is None else blocks
        fused = [None] * len(blocks) if fused is None else fused
        x = self.embed_tokens(tokens)
        ks, vs = [], []
        for blk, fq, kc, vc in zip(blocks, fused, cache.k, cache.v):
            x, (kc, vc) = blk.decode(x, positions, inv_freq, kc, vc, index, attend, fq)
            ks.append(kc)
            vs.append(vc)
        return rms_norm(x, self.final_norm[...], cfg.rms_norm_eps), KVCache(tuple(ks), tuple(vs))

    def _decode_fused(self, tokens, cache: KVCache, index, positions, kv_start, blocks, fused):
        cfg = self.config
        b, t = tokens.shape
        if t != 1:
            raise ValueError(f"fused decode attention takes one new token per row, got {t}")
        blocks = self.layer_list() if blocks is None else blocks
        fused = [blk.fused_qkv() for blk in blocks] if fused is None else fused
        cos_sin = rope_cos_sin(positions[:, 0], rope_inv_freq(cfg))  # once per step, shared by the layers
        x = self.embed_tokens(tokens)
        ks, vs = [], []
        for blk, fq, kc, vc in zip(blocks, fused, cache.k, cache.v):
            x, (kc, vc) = blk.decode_fused(x, cos_sin, kc, vc, index, kv_start, fq)
            ks.append(kc)
            vs.append(vc)
        return rms_norm(x, self.final_norm[...], cfg.rms_norm_eps), KVCache(tuple(ks), tuple(vs))


def cache_from_prefill(kvs, length: int) -> KVCache:
    """A cache of ``length`` slots whose first T slots hold the prefill keys/values [L, B, T, K, H]."""
    k, v = kvs
    pad = [(0, 0), (0, 0), (0, length - k.shape[2]), (0, 0)]
    ks = tuple(jnp.pad(k[i].swapaxes(1, 2), pad) for i in range(k.shape[0]))
    vs = tuple(jnp.pad(v[i].swapaxes(1, 2), pad) for i in range(v.shape[0]))
    return KVCache(ks, vs)


class CausalLM(nnx.Module):
    """The policy: ``model(tokens [B, T]) -> logits [B, T, V]`` (fp32)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        self.config = cfg
        self.hf_config_json: str | None = None  # the original config.json when loaded from a checkpoint
        self.model = Decoder(cfg, rngs=rngs)
        if cfg.tie_word_embeddings:
            self.lm_head = None
        else:
            init = nnx.initializers.normal(cfg.initializer_range)
            self.lm_head = nnx.Param(
                init(rngs.params(), (cfg.vocab_size, cfg.hidden_size), cfg.param_jnp_dtype)
            )

    def unembedding(self):
        """The output projection [V, D] (the embedding table when tied)."""
        return (self.model.embed if self.lm_head is None else self.lm_head)[...]

    def logits(self, hidden):
        w = self.unembedding().astype(self.config.compute_jnp_dtype)
        return unembed(hidden.astype(w.dtype), w)

    def hidden_states(self, tokens, positions=None, attention_mask=None, *, segment_ids=None):
        return self.model(tokens, positions, attention_mask, segment_ids=segment_ids)

    def __call__(self, tokens, positions=None, attention_mask=None, *, segment_ids=None):
        return self.logits(self.model(tokens, positions, attention_mask, segment_ids=segment_ids))

    def decode(self, tokens, cache: KVCache, index, positions=None, kv_start=None):
        """Cached forward of new tokens; returns logits [B, T, V] (fp32) and the updated cache."""
        hidden, cache = self.model.decode(tokens, cache, index, positions, kv_start)
        return self.logits(hidden), cache


def init_model(cfg: ModelConfig, seed: int = 0, cls=CausalLM):
    """A randomly initialised model: weights normal(0, initializer_range), norms one, biases zero (the
    modules' own initialisers' distribution), drawn in one RNG call inside one jitted program, which
    compiles in a fraction of the time of the per-parameter initialisers and never leaves the device."""
    graphdef = nnx.graphdef(abstract_model(cfg, cls))
    return nnx.merge(graphdef, _init_fn(cfg, cls)(jax.random.key(seed)))


def _init_value(path: str, shape, dtype, noise, std: float):
    name = path.rsplit("/", 1)[-1]
    if name.endswith("norm"):
        return jnp.ones(shape, dtype)
    if name.endswith("bias"):
        return jnp.zeros(shape, dtype)
    return (std * noise).reshape(shape).astype(dtype)


@functools.lru_cache(maxsize=16)
def _init_fn(cfg: ModelConfig, cls):
    _, abstract = nnx.split(abstract_model(cfg, cls))
    pure = nnx.to_pure_dict(abstract)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(pure)
    paths = ["/".join(str(getattr(k, "key", k)) for k in keys) for keys, _ in leaves]
    sizes = [int(np.prod(a.shape)) for _, a in leaves]

    @jax.jit
    def init(key):
        noise = jax.random.normal(key, (sum(sizes),), F32)
        out, offset = [], 0
        for path, (_, a), n in zip(paths, leaves, sizes):
            out.append(_init_value(path, a.shape, a.dtype, noise[offset : offset + n], cfg.initializer_range))
            offset += n
        state = nnx.state(abstract_model(cfg, cls))
        nnx.replace_by_pure_dict(state, jax.tree_util.tree_unflatten(treedef, out))
        return state

    return init


def abstract_model(cfg: ModelConfig, cls=CausalLM):
    """The model's structure with ``jax.ShapeDtypeStruct`` leaves (no memory, no random init)."""
    return nnx.eval_shape(lambda: cls(cfg, rngs=nnx.Rngs(0)))


def cast_params(model, dtype):
    """A copy of ``model`` whose floating parameters are cast to ``dtype`` (inference views)."""
    graphdef, state = nnx.split(model)
    state = jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, state)
    return nnx.merge(graphdef, state)
