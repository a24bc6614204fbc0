"""The transformer block (attention with GQA + RoPE + optional q/k norm, SwiGLU MLP) and its pure helpers.

Weights are stored in Hugging Face's [out, in] orientation, reshaped per head, so checkpoint conversion is
a reshape (bit-exact both ways). Computation happens in ``config.compute_dtype``: parameters are cast at use,
normalisation statistics, softmax and RoPE angles are fp32.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

from ._config import ModelConfig

F32 = jnp.float32
_NEG = -0.7 * float(np.finfo(np.float32).max)  # finite: a fully masked row (padding) stays NaN-free


# Elementwise pieces are rematerialised for the backward pass: their fp32 intermediates would otherwise be
# saved per layer (several times the bf16 activations), costing memory and bandwidth for almost no FLOPs.
@functools.partial(jax.checkpoint, static_argnums=(2,))
def rms_norm(x, weight, eps: float):
    """Hugging Face's RMSNorm: statistics in fp32, result in ``x.dtype`` times the weight."""
    x32 = x.astype(F32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return weight.astype(x.dtype) * y.astype(x.dtype)


@jax.checkpoint
def swiglu(gate, up):
    return (jax.nn.silu(gate.astype(F32)) * up.astype(F32)).astype(gate.dtype)


@jax.custom_vjp
def unembed(hidden, w):
    """Logits ``hidden [..., D] @ w [V, D].T`` in fp32 (fp32 accumulation) from compute-dtype operands.

    The backward products run on the compute dtype with fp32 accumulation; the default transpose of a
    product with an fp32 output would run them as fp32 matmuls (the cotangent is fp32)."""
    return jnp.einsum("...d,vd->...v", hidden, w, preferred_element_type=F32)


def _unembed_fwd(hidden, w):
    return unembed(hidden, w), (hidden, w)


def _unembed_bwd(res, g):
    hidden, w = res
    g = g.astype(hidden.dtype)
    d_hidden = jnp.einsum("...v,vd->...d", g, w, preferred_element_type=F32).astype(hidden.dtype)
    d_w = jnp.einsum("...v,...d->vd", g, hidden, preferred_element_type=F32).astype(w.dtype)
    return d_hidden, d_w


unembed.defvjp(_unembed_fwd, _unembed_bwd)


def rope_inv_freq(cfg: ModelConfig) -> np.ndarray:
    """Inverse RoPE frequencies [head_dim/2] in fp32, computed as transformers does (incl. llama3 scaling)."""
    dim = cfg.head_dim
    exponent = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    inv = (np.float32(1.0) / np.power(np.float32(cfg.rope_theta), exponent)).astype(np.float32)
    rs = cfg.rope_scaling
    if rs is None:
        return inv
    if rs.rope_type == "linear":
        return (inv / np.float32(rs.factor)).astype(np.float32)
    old = rs.original_max_position_embeddings
    low_wavelen, high_wavelen = old / rs.low_freq_factor, old / rs.high_freq_factor
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > low_wavelen, inv / rs.factor, inv)
    smooth = (old / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor)
    smoothed = (1 - smooth) * scaled / rs.factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def apply_rope(x, positions, inv_freq):
    """Rotate-half RoPE. x [B, T, heads, H]; positions [B, T] int."""
    angles = positions[..., None].astype(F32) * jnp.asarray(inv_freq)  # [B, T, H/2]
    cos, sin = jnp.cos(angles)[:, :, None], jnp.sin(angles)[:, :, None]
    x1, x2 = jnp.split(x.astype(F32), 2, axis=-1)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


def attention(q, k, v, *, impl: str, key_mask=None, segment_ids=None):
    """Causal self-attention over a whole sequence. q [B,T,N,H], k/v [B,T,K,H]; key_mask [B,T] bool or None
    (False = padding key); segment_ids [B,T] int or None: several sequences packed in a row, a query attends
    only to keys of its own segment (block-diagonal and causal). ``impl``: 'xla' or 'cudnn' (fused flash
    attention, GPU only). jax.nn's cudnn path has no per-segment lengths (its seq lengths are one per row),
    so segments go in as a boolean mask there too (cuDNN turns it into a bias)."""
    mask = None
    if key_mask is not None:
        b, t = key_mask.shape
        mask = jnp.broadcast_to(key_mask[:, None, None, :], (b, 1, t, t))
    if segment_ids is not None:
        same = (segment_ids[:, :, None] == segment_ids[:, None, :])[:, None]  # [B, 1, T, T]
        mask = same if mask is None else mask & same
    return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=True, implementation=impl)


def cached_attention(q, k_cache, v_cache, mask):
    """Attention of new queries against a KV cache. q [B,T,N,H]; caches [B,K,S,H] (head-major so the two
    products are plain batched matmuls); mask [B,T,S] bool. Softmax in fp32."""
    b, t, n, h = q.shape
    kh = k_cache.shape[1]
    qg = q.reshape(b, t, kh, n // kh, h)
    scores = jnp.einsum("btkgh,bksh->bkgts", qg, k_cache, preferred_element_type=F32) / np.sqrt(h)
    scores = jnp.where(mask[:, None, None], scores, _NEG)
    probs = jax.nn.softmax(scores, axis=-1).astype(v_cache.dtype)
    out = jnp.einsum("bkgts,bksh->btkgh", probs, v_cache)
    return out.reshape(b, t, n, h)


class Block(nnx.Module):
    """One pre-norm decoder layer. Parameters (HF orientation): q [N,H,D], kv [2,K,H,D], o [D,N,H],
    gate_up [2,F,D], down [D,F]."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        d, n, kh, h, f = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
        pd = cfg.param_jnp_dtype
        init = nnx.initializers.normal(cfg.initializer_range)
        self.config = cfg
        self.input_norm = nnx.Param(jnp.ones((d,), pd))
        self.q_proj = nnx.Param(init(rngs.params(), (n, h, d), pd))
        self.kv_proj = nnx.Param(init(rngs.params(), (2, kh, h, d), pd))
        self.q_bias = nnx.Param(jnp.zeros((n, h), pd)) if cfg.qkv_bias else None
        self.kv_bias = nnx.Param(jnp.zeros((2, kh, h), pd)) if cfg.qkv_bias else None
        self.q_norm = nnx.Param(jnp.ones((h,), pd)) if cfg.qk_norm else None
        self.k_norm = nnx.Param(jnp.ones((h,), pd)) if cfg.qk_norm else None
        self.o_proj = nnx.Param(init(rngs.params(), (d, n, h), pd))
        self.o_bias = nnx.Param(jnp.zeros((d,), pd)) if cfg.out_bias else None
        self.post_norm = nnx.Param(jnp.ones((d,), pd))
        self.gate_up = nnx.Param(init(rngs.params(), (2, f, d), pd))
        self.down = nnx.Param(init(rngs.params(), (d, f), pd))

    def _w(self, p):
        return p[...].astype(self.config.compute_jnp_dtype)

    def fused_qkv(self):
        """The q, k and v projections as one [(N + 2K) * H, D] matrix (and bias), for decoding: one
        matmul instead of two per layer and step. Made once per decode call, outside the step loop."""
        cfg = self.config
        n, kh, h, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.hidden_size
        w = jnp.concatenate(
            [self._w(self.q_proj).reshape(n * h, d), self._w(self.kv_proj).reshape(2 * kh * h, d)]
        )
        bias = None
        if self.q_bias is not None:
            bias = jnp.concatenate([self._w(self.q_bias).reshape(-1), self._w(self.kv_bias).reshape(-1)])
        return w, bias

    def project_qkv(self, x, positions, inv_freq, fused=None):
        """Pre-norm, q/k/v projections, optional q/k norm, RoPE. Returns q [B,T,N,H], k and v [B,T,K,H]."""
        cfg = self.config
        n, kh, h = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        hn = rms_norm(x, self.input_norm[...], cfg.rms_norm_eps)
        if fused is None:
            q = jnp.einsum("btd,nhd->btnh", hn, self._w(self.q_proj))
            kv = jnp.einsum("btd,ckhd->btckh", hn, self._w(self.kv_proj))
            if self.q_bias is not None:
                q = q + self._w(self.q_bias)
                kv = kv + self._w(self.kv_bias)
        else:
            w, bias = fused
            y = jnp.einsum("btd,od->bto", hn, w)
            if bias is not None:
                y = y + bias
            b, t = y.shape[:2]
            q = y[..., : n * h].reshape(b, t, n, h)
            kv = y[..., n * h :].reshape(b, t, 2, kh, h)
        k, v = kv[:, :, 0], kv[:, :, 1]
        if self.q_norm is not None:
            q = rms_norm(q, self.q_norm[...], cfg.rms_norm_eps)
            k = rms_norm(k, self.k_norm[...], cfg.rms_norm_eps)
        q, k = apply_rope(q, positions, inv_freq), apply_rope(k, positions, inv_freq)
        return q, k, v

    def __call__(self, x, positions, inv_freq, key_mask=None, segment_ids=None):
        q, k, v = self.project_qkv(x, positions, inv_freq)
        attn = attention(q, k, v, impl=self.config.attention_impl, key_mask=key_mask, segment_ids=segment_ids)
        attn = checkpoint_name(attn, "attn_out")
        return self._residual_mlp(x, attn), (k, v)

    def decode(self, x, positions, inv_freq, k_cache, v_cache, index, attend, fused=None):
        """New tokens x [B,T,D] at cache slots index..index+T-1; caches [B,K,S,H]. ``attend(q, k_cache,
        v_cache)``: the cached attention (its mask bound). ``fused``: the output of :meth:`fused_qkv`, when
        the caller made it once for many steps."""
        q, k, v = self.project_qkv(x, positions, inv_freq, fused)
        k_cache = jax.lax.dynamic_update_slice(
            k_cache, k.swapaxes(1, 2).astype(k_cache.dtype), (0, 0, index, 0)
        )
        v_cache = jax.lax.dynamic_update_slice(
            v_cache, v.swapaxes(1, 2).astype(v_cache.dtype), (0, 0, index, 0)
        )
        attn = attend(q, k_cache, v_cache)
        return self._residual_mlp(x, attn), (k_cache, v_cache)

    def decode_fused(self, x, cos_sin, k_cache, v_cache, index, kv_start, fused):
        """One new token per row (x [B,1,D]) through :func:`models._fused_decode.fused_decode_attention`:
        the fused q/k/v projection (plus q/k norms) feeds one kernel that applies RoPE, appends to the caches
        [B,K,S,H] at slot ``index`` and attends over ``kv_start..index``."""
        from ._fused_decode import fused_decode_attention

        cfg = self.config
        n, kh, h = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        w, bias = fused
        y = jnp.einsum("btd,od->bto", rms_norm(x, self.input_norm[...], cfg.rms_norm_eps), w)
        if bias is not None:
            y = y + bias
        y = y.reshape(x.shape[0], n + 2 * kh, h)
        if self.q_norm is not None:
            q = rms_norm(y[:, :n], self.q_norm[...], cfg.rms_norm_eps)
            k = rms_norm(y[:, n : n + kh], self.k_norm[...], cfg.rms_norm_eps)
            y = jnp.concatenate([q, k, y[:, n + kh :]], axis=1)
        attn, k_cache, v_cache = fused_decode_attention(
            y, cos_sin, k_cache, v_cache, kv_start=kv_start, index=index, num_heads=n
        )
        return self._residual_mlp(x, attn[:, None]), (k_cache, v_cache)

    def _residual_mlp(self, x, attn):
        """Output projection + residual, then the SwiGLU MLP + residual."""
        cfg = self.config
        out = jnp.einsum("btnh,dnh->btd", attn.astype(x.dtype), self._w(self.o_proj))
        if self.o_bias is not None:
            out = out + self._w(self.o_bias)
        x = x + out
        hn = rms_norm(x, self.post_norm[...], cfg.rms_norm_eps)
        gu = jnp.einsum("btd,cfd->btcf", hn, self._w(self.gate_up))
        act = swiglu(gu[:, :, 0], gu[:, :, 1])
        return x + jnp.einsum("btf,df->btd", act, self._w(self.down))
