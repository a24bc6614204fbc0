"""How the Sampler's decode loop is built: :class:`DecodeConfig` and the pieces it selects.

A decode step of a small model at small batch is bound by per-kernel overhead, not by bandwidth: hundreds
of small kernels each cost a few microseconds. The knobs here cut that overhead without changing what is
computed:

* ``fused_qkv``: one q/k/v matmul per layer instead of two (the weights concatenated once per call).
* ``attention="fused"``: one Pallas (Triton) kernel per layer for RoPE, the cache append and the attention
  (``models._fused_decode``), reading the q/k/v projection's output directly, instead of about seven XLA
  kernels. ``attention="pallas"``: JAX's split-K flash-decoding kernel
  (``jax.experimental.pallas.ops.gpu.decode_attention``) for the attention only (better for long caches at
  small batch). Both read only the filled part of the cache; on a GPU they compile with Triton, elsewhere
  they run in Pallas' interpreter (for tests).
* ``command_buffers``: XLA records runs of kernels into CUDA graphs ("command buffers"). By default each
  loop iteration's kernels are one graph, but the ``while`` loop itself stays on the host: every step the
  host copies the loop predicate back, waits, and launches the next graph. ``"while"`` adds the WHILE and
  CONDITIONAL command types for this executable only (``jax.jit(..., compiler_options=...)``, never the
  process-wide ``XLA_FLAGS``), so the whole loop becomes one graph with device-side control flow.
* ``steps_per_iteration``: decode steps per loop iteration (later ones guarded), amortising that per-
  iteration host round trip when the loop cannot be a graph.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import jax
import jax.numpy as jnp

ATTENTION = ("auto", "xla", "pallas", "fused")
COMMAND_BUFFERS = ("default", "while", "off")
# XLA's default command types plus WHILE and CONDITIONAL. A repeated-enum compile option is a plain list
# (the "+WHILE" syntax of XLA_FLAGS is not accepted there); variants for XLA builds without some names.
_WHILE_COMMAND_TYPES = (
    "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,DYNAMIC_SLICE_FUSION,WHILE,CONDITIONAL",
    "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL",
)


@dataclass(frozen=True)
class DecodeConfig:
    """How :class:`models.Sampler` compiles its decode loop (not what it computes).

    The default is the configuration expected to be fastest on a GPU (see docs/models.md for the
    measurements); every setting produces the same tokens up to floating-point rounding (``"pallas"``
    attention accumulates in a different order)."""

    fused_qkv: bool = True
    attention: str = "auto"  # auto (fused on a GPU with bf16/fp16 compute, else xla) | xla | pallas | fused
    command_buffers: str = "while"  # default (XLA's) | while (the whole loop one CUDA graph) | off
    steps_per_iteration: int = 1

    def __post_init__(self):
        problems = []
        if self.attention not in ATTENTION:
            problems.append(f"attention {self.attention!r} not in {ATTENTION}")
        if self.command_buffers not in COMMAND_BUFFERS:
            problems.append(f"command_buffers {self.command_buffers!r} not in {COMMAND_BUFFERS}")
        if not isinstance(self.steps_per_iteration, int) or self.steps_per_iteration < 1:
            problems.append(f"steps_per_iteration must be an int >= 1, got {self.steps_per_iteration!r}")
        if self.attention == "fused" and not self.fused_qkv:
            problems.append("attention='fused' reads the fused q/k/v projection: it needs fused_qkv=True")
        if problems:
            raise ValueError("invalid DecodeConfig: " + "; ".join(problems))

    def resolved_attention(self, model_config, backend: str | None = None, sharded: bool = False) -> str:
        """``xla``, ``pallas`` or ``fused`` for this model on this backend (``auto`` resolved: a Triton
        kernel on a GPU with bf16/fp16 compute and shapes it supports, else XLA). ``sharded``: the
        parameters span several devices; XLA cannot partition a Triton call, so ``auto`` keeps XLA."""
        if self.attention != "auto":
            return self.attention
        backend = backend or jax.default_backend()
        if backend != "gpu" or model_config.compute_dtype not in ("bfloat16", "float16") or sharded:
            return "xla"  # fp32 Triton dots would run in TF32
        group = model_config.num_heads // model_config.num_kv_heads
        if self.fused_qkv and fused_supported(model_config.head_dim, group):
            return "fused"
        return "pallas" if pallas_supported(model_config.head_dim) else "xla"

    def compiler_options(self, backend: str | None = None) -> dict[str, str]:
        """Per-executable XLA options of the decode program (empty off GPU or for ``default``)."""
        backend = backend or jax.default_backend()
        if backend != "gpu" or self.command_buffers == "default":
            return {}
        if self.command_buffers == "off":
            return {"xla_gpu_enable_command_buffer": ""}
        for types in _WHILE_COMMAND_TYPES:
            if _options_accepted((("xla_gpu_enable_command_buffer", types),)):
                return {"xla_gpu_enable_command_buffer": types}
        warnings.warn(
            "this XLA rejects every spelling of the WHILE command-buffer option; decoding with XLA's "
            "default command buffers instead",
            RuntimeWarning,
            stacklevel=2,
        )
        return {}


@functools.cache
def _options_accepted(options: tuple[tuple[str, str], ...]) -> bool:
    """Whether this XLA parses these compile options (a tiny while loop, compiled once per process)."""

    def loop(x):
        return jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1]

    try:
        jax.jit(loop, compiler_options=dict(options)).lower(jnp.ones((2,), jnp.float32)).compile()
    except Exception:  # noqa: BLE001 - XLA reports an unknown option or enum value as a runtime error
        return False
    return True


def pallas_supported(head_dim: int) -> bool:
    """Triton blocks need power-of-two extents; the kernel's q tile is [16, head_dim]."""
    return 16 <= head_dim <= 256 and head_dim & (head_dim - 1) == 0


def fused_supported(head_dim: int, group: int) -> bool:
    """The fused kernel loads half heads (power-of-two extents, >= 16 for its dots) and <= 16 query heads
    per KV head."""
    return 32 <= head_dim <= 256 and head_dim & (head_dim - 1) == 0 and group <= 16


CACHE_MULTIPLE = 64  # the Pallas kernel's key blocks: cache lengths are padded to a multiple of this


def _k_splits(batch_heads: int, cache_len: int) -> int:
    """Splits of the cache per (row, kv head): more programs when the grid is far below a wave of SMs and
    the cache is long (>= 512 keys per split, a whole number of 64-key blocks each). Short caches stay in
    one split: every split costs combining kernels after the attention kernel."""
    splits = 1
    while (
        batch_heads * splits < 128
        and cache_len % (2 * splits * CACHE_MULTIPLE) == 0
        and cache_len // (2 * splits) >= 512
    ):
        splits *= 2
    return splits


def pallas_decode_attention(q, k_cache, v_cache, *, kv_start, kv_len):
    """Attention of one new query per row against a head-major cache with a split-K flash-decoding
    kernel. q [B, 1, N, H]; caches [B, K, S, H] (S a multiple of 64); row b attends to cache slots
    ``kv_start[b] <= s < kv_len[b]``. Softmax statistics in fp32; the unnormalised output is combined
    across splits by the library and normalised here in fp32."""
    from jax.experimental.pallas.ops.gpu import decode_attention as pda

    b, t, n, h = q.shape
    if t != 1:
        raise ValueError(f"pallas decode attention takes one new token per row, got {t}")
    kh, s = k_cache.shape[1], k_cache.shape[2]
    if s % CACHE_MULTIPLE:
        raise ValueError(f"cache length {s} must be a multiple of {CACHE_MULTIPLE} for pallas attention")
    splits = _k_splits(b * kh, s)
    block_k = 128 if (s // splits) % 128 == 0 else CACHE_MULTIPLE
    # The library takes [B, S, K, H] and transposes back to head-major: XLA cancels the two transposes.
    o, (l_sum, _) = pda.gqa(
        q[:, 0],
        k_cache.swapaxes(1, 2),
        v_cache.swapaxes(1, 2),
        start_idx=kv_start,
        kv_seq_len=kv_len,
        sm_scale=1.0 / math.sqrt(h),
        block_k=block_k,
        k_splits=splits,
        return_residuals=True,
        normalize_output=False,
        interpret=jax.default_backend() != "gpu",
    )
    # Every decoding row attends to at least its newest key, so the denominator is >= 1.
    out = o.astype(jnp.float32) / l_sum[..., None]
    return out.astype(q.dtype)[:, None]
