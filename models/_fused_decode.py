"""One Pallas (Triton) kernel per layer and decode step: RoPE of the new query and key, the cache append, and
flash-decoding attention over the filled cache slots.

XLA needs about seven kernels for this per layer (two RoPE fusions, two in-place cache updates, two attention
matmuls, softmax); at decode sizes each costs a few microseconds of launch and ramp-up, far more than its
data movement. This kernel reads the q/k/v projection straight from the projection matmul's output and
writes the attention output in the layout the output projection reads, so nothing runs between them.

Grid: (batch row, KV head). A program rotates its query heads (padded to 16 rows, the smallest Triton dot)
and its key, scores the new key in registers, walks the cached keys ``kv_start <= s < index`` in blocks with
an online softmax (fp32 statistics and accumulator, bf16 probabilities into the value product, as the XLA
path's bf16 probabilities), normalises in fp32, and finally writes the rotated key and the value to slot
``index`` of the caches, which alias its inputs (updated in place). Arithmetic follows the XLA path
(``apply_rope``, ``cached_attention``): the same fp32 RoPE, the scores divided by sqrt(head_dim); results
agree to rounding (summation order), not bit for bit.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

F32 = jnp.float32
_NEG = -0.7 * float(np.finfo(np.float32).max)
ROWS = 16  # query rows per program: tl.dot needs >= 16
BLOCK_K = 64  # keys per step of the cache walk; cache lengths are multiples of it


def _kernel(
    y_ref,
    cs_ref,
    start_ref,
    index_ref,
    kc_ref,
    vc_ref,
    o_ref,
    kc_out,
    vc_out,
    *,
    num_heads,
    num_kv_heads,
    group,
    head_dim,
    block_k,
):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    half = head_dim // 2
    h = pl.program_id(1)
    first = h * group
    rows = pl.ds(first, ROWS)
    row_ok = (jnp.arange(ROWS) < group)[:, None]
    sqrt_d = np.float32(np.sqrt(head_dim))
    dtype = y_ref.dtype

    cos = cs_ref[pl.ds(0, 1), :]  # [1, half] fp32
    sin = cs_ref[pl.ds(1, 1), :]

    def rope(x1, x2):
        x1, x2 = x1.astype(F32), x2.astype(F32)
        return (x1 * cos - x2 * sin).astype(dtype), (x2 * cos + x1 * sin).astype(dtype)

    q1, q2 = rope(
        plgpu.load(y_ref.at[rows, pl.ds(0, half)], mask=row_ok, other=0.0),
        plgpu.load(y_ref.at[rows, pl.ds(half, half)], mask=row_ok, other=0.0),
    )  # [ROWS, half] each
    krow = pl.ds(num_heads + h, 1)
    k1, k2 = rope(y_ref[krow, pl.ds(0, half)], y_ref[krow, pl.ds(half, half)])  # [1, half]
    v = y_ref[pl.ds(num_heads + num_kv_heads + h, 1), :]  # [1, head_dim]
    start = start_ref[...]
    index = index_ref[...]

    # The new key, in registers: it starts the online softmax (its probability is exp(0) = 1).
    s_new = (
        jnp.sum(q1.astype(F32) * k1.astype(F32), axis=1) + jnp.sum(q2.astype(F32) * k2.astype(F32), axis=1)
    ) / sqrt_d
    acc = jnp.broadcast_to(v.astype(F32), (ROWS, head_dim))
    lsum = jnp.ones((ROWS,), F32)

    def body(j, carry):
        m, lsum, acc = carry
        s0 = j * block_k
        keys = pl.ds(s0, block_k)
        kb1 = kc_ref[keys, pl.ds(0, half)]
        kb2 = kc_ref[keys, pl.ds(half, half)]
        s = (plgpu.dot(q1, kb1, trans_b=True) + plgpu.dot(q2, kb2, trans_b=True)) / sqrt_d  # [ROWS, block_k]
        slot = s0 + jnp.arange(block_k)
        s = jnp.where(((slot >= start) & (slot < index))[None, :], s, _NEG)
        m_new = jnp.maximum(m, jnp.max(s, axis=1))
        corr = jnp.exp(m - m_new)
        p = jnp.exp(s - m_new[:, None])
        lsum = lsum * corr + jnp.sum(p, axis=1)
        acc = acc * corr[:, None] + plgpu.dot(p.astype(dtype), vc_ref[keys, :])
        return m_new, lsum, acc

    lo = start // block_k
    hi = (index + block_k - 1) // block_k
    _, lsum, acc = jax.lax.fori_loop(lo, hi, body, (s_new, lsum, acc))
    plgpu.store(o_ref.at[rows, :], (acc / lsum[:, None]).astype(o_ref.dtype), mask=row_ok)
    # Last: the walk above read slot ``index`` (masked) before this write.
    slot = pl.ds(index, 1)
    kc_out[slot, pl.ds(0, half)] = k1
    kc_out[slot, pl.ds(half, half)] = k2
    vc_out[slot, :] = v


# Jitted so that the layers' identical calls are lowered (and their Triton kernel compiled) once per program.
@functools.partial(jax.jit, static_argnames=("num_heads", "interpret"))
def fused_decode_attention(y, cos_sin, k_cache, v_cache, *, kv_start, index, num_heads, interpret=None):
    """RoPE + cache append + attention for one new token per row, one kernel.

    y [B, N + 2K, H]: the new token's q, k, v heads (projection output with bias and any q/k norm applied,
    RoPE not yet applied); cos_sin [B, 2, H/2] fp32 at the token's position; caches [B, K, S, H], S a
    multiple of 64, written at slot ``index`` (a scalar, clamped to the cache) in place; row b attends to
    slots ``kv_start[b] <= s <= index``. Returns (attention output [B, N, H], k_cache, v_cache)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    b, rows, head_dim = y.shape
    kh, s = k_cache.shape[1], k_cache.shape[2]
    group = num_heads // kh
    if rows != num_heads + 2 * kh or group > ROWS or s % BLOCK_K or head_dim % 32:
        raise ValueError(
            f"fused decode attention needs y [B, N + 2K, H] with N/K <= {ROWS}, H a multiple of 32 and a "
            f"cache length that is a multiple of {BLOCK_K}; got y {y.shape}, cache {k_cache.shape}"
        )
    if interpret is None:
        interpret = jax.default_backend() != "gpu"
    kernel = functools.partial(
        _kernel,
        num_heads=num_heads,
        num_kv_heads=kh,
        group=group,
        head_dim=head_dim,
        block_k=BLOCK_K,
    )
    # Clamped like dynamic_update_slice: an index past the cache can never write outside it.
    index = jnp.broadcast_to(jnp.clip(jnp.asarray(index, jnp.int32), 0, s - 1), (b,))
    cache_spec = pl.BlockSpec((None, None, s, head_dim), lambda i, j: (i, j, 0, 0))
    return pl.pallas_call(
        kernel,
        grid=(b, kh),
        in_specs=[
            pl.BlockSpec((None, rows, head_dim), lambda i, j: (i, 0, 0)),
            pl.BlockSpec((None, 2, head_dim // 2), lambda i, j: (i, 0, 0)),
            pl.BlockSpec((None,), lambda i, j: (i,)),
            pl.BlockSpec((None,), lambda i, j: (i,)),
            cache_spec,
            cache_spec,
        ],
        out_specs=[pl.BlockSpec((None, num_heads, head_dim), lambda i, j: (i, 0, 0)), cache_spec, cache_spec],
        out_shape=[
            jax.ShapeDtypeStruct((b, num_heads, head_dim), y.dtype),
            jax.ShapeDtypeStruct(k_cache.shape, k_cache.dtype),
            jax.ShapeDtypeStruct(v_cache.shape, v_cache.dtype),
        ],
        input_output_aliases={4: 1, 5: 2},
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
        interpret=interpret,
        name="fused_decode_attention",
    )(y, cos_sin, kv_start.astype(jnp.int32), index, k_cache, v_cache)


def rope_cos_sin(positions, inv_freq):
    """[B, 2, H/2] fp32 cos and sin of the RoPE angles at ``positions`` [B] (as ``apply_rope`` computes)."""
    angles = positions.astype(F32)[:, None] * jnp.asarray(inv_freq)
    return jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=1)
