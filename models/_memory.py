"""A memory model of one learner + rollout device: bytes per component for a :class:`ModelConfig` and the
settings of a run, so sizes (micro-batch tokens, remat, KV budget) are chosen before a GPU is rented.

It follows this repository's code, not a generic recipe:

* Parameters are stored in ``cfg.param_dtype`` (fp32 masters for training) and cast to ``cfg.compute_dtype``
  at use (``models._layers.Block._w``). Gradients come out in the parameters' dtype. ``research.rl``'s
  AdamW is ``optax.adamw`` with its default ``mu_dtype=None``: two moments in the parameters' dtype
  (``optimizer_dtype`` overrides that for plans of other optimizers).
* Gradient accumulation (``research.rl._update.accumulate``) keeps the running sum and one micro-batch's
  gradients at once: two gradient trees while accumulating (``accumulate=False``: one micro-batch, one tree).
  The optimizer step then makes one update tree (``tx.update``) next to parameters, gradients and moments.
* Activations: the layers run under ``lax.scan``; per layer the backward pass keeps what the remat policy
  (``cfg.remat``) saves, then recomputes one layer at a time (its full working set plus cotangents). The
  per-token tensors of a block are x, the two RMSNorm outputs, q/k/v (and q/k before their norm in Qwen3),
  the attention output, the mid-block residual, gate/up and the SwiGLU output. ``attention_impl="xla"``
  materialises [heads, T, T] fp32 softmax outputs plus the compute-dtype probabilities per row (and the
  backward's fp32 cotangents); ``cudnn`` (flash) keeps only the output and fp32 softmax statistics.
* Logits: ``models.token_logprobs`` never builds [B, T, V]; it scans ``chunk_size`` tokens at a time, so the
  live logits are [chunk, V] fp32 (logits, their exp in the backward) plus the compute-dtype cotangent. The
  unembedding gradient of the chunk scan (a [V, D] carry and one chunk's product, parameter dtype) is
  counted with the gradients as ``grad_workspace``.
* A critic (``models.Critic``) is a second backbone (embedding, no lm head, fp32 value head) with its own
  gradients and AdamW moments, and its own activations (``critic_activations``, the backbone's: it computes
  no vocabulary logits). Both are live at once: the PPO update is one jitted program and XLA's scheduler
  does not finish the actor's backward before the critic's forward (measured on an H200, 2026-12-05: the
  0.5B update at 32K tokens without remat plans 34.4 GiB of scratch for the actor alone and 66.4 GiB with a
  critic; docs/results/sizes_gpu.md). A frozen reference policy (KL penalties) is one more copy of the
  parameters.
* Rollouts (``models.Sampler`` / ``models.Engine``) cast the parameters to the compute dtype inside their
  jitted programs (one copy, none when both dtypes agree) and keep keys and values in the compute dtype,
  ``2 x layers x kv_heads x head_dim`` per token; the Engine's pool holds ``kv_tokens // page_size`` pages
  plus one trash page. A prefill of ``prefill_tokens`` per row over ``rollout_rows`` rows needs one layer's
  forward working set, the prefill's keys and values before they are copied into the cache, the hidden
  states (and the [heads, P, P] scores with ``xla`` attention).
* Sharding: parameters, gradients and moments are split by ``models.DEFAULT_RULES`` on an ``fsdp`` axis of
  ``devices`` (a dimension the axis does not divide stays replicated, as in ``models._sharding._fit``);
  batches are split over rows, so ``micro_batch_tokens`` and ``rollout_rows`` are global and divided by
  ``devices``.

Phases: the learner's peak is the larger of the forward/backward (gradients + activations + logits) and the
optimizer step (gradients + updates); rollouts add the compute copy, the KV cache and the prefill. Without
``overlap`` the two phases alternate (the total is the resident state plus the larger phase); with it (the
pipeline's background rollouts) both are live at once. Not modelled: XLA's own workspace (cuBLAS / cuDNN
scratch, fusion temporaries), fragmentation, and the CUDA context (~0.5-1 GiB): keep a margin (the presets
plan against 130 GiB of an H200's 139 GiB).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ._config import ModelConfig
from ._sharding import DEFAULT_RULES, spec_for

GiB = 1024**3
_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class MemorySettings:
    """What a run sets besides the model: ``micro_batch_tokens`` (rows x T per micro-batch, over all devices,
    ``research.rl.LearnerConfig.micro_batch_tokens``), ``seq_len`` (T: the attention span of a row),
    ``chunk_size`` (the log-prob chunk), ``critic`` / ``reference`` (trained critic, frozen KL reference),
    ``accumulate`` (several micro-batches per step), ``optimizer_dtype`` (None: the parameters'),
    ``kv_tokens`` (rollout KV cache tokens over all devices) in pages of ``page_size``, ``rollout_rows`` and
    ``prefill_tokens`` (a prefill's rows and tokens per row), ``devices`` (the fsdp axis), ``overlap``
    (rollouts while learning)."""

    micro_batch_tokens: int = 16384
    seq_len: int = 4096
    chunk_size: int = 1024
    critic: bool = True
    reference: bool = False
    accumulate: bool = True
    optimizer_dtype: str | None = None
    kv_tokens: int = 0
    page_size: int = 16
    rollout_rows: int = 0
    prefill_tokens: int = 0
    devices: int = 1
    overlap: bool = False

    def __post_init__(self):
        for name in ("micro_batch_tokens", "seq_len", "chunk_size", "page_size", "devices"):
            if getattr(self, name) < 1:
                raise ValueError(f"MemorySettings.{name} must be >= 1, got {getattr(self, name)}")
        if self.micro_batch_tokens < self.seq_len:
            raise ValueError(
                f"MemorySettings: micro_batch_tokens ({self.micro_batch_tokens}) holds less than one row of "
                f"seq_len={self.seq_len} tokens (the learner takes one row at the least)"
            )


@dataclass
class MemoryPlan:
    """Bytes per device by component (``components``), the resident and per-phase sums and ``total``."""

    components: dict[str, int]
    params_count: int
    critic_params_count: int
    learner_peak: int
    rollout_peak: int
    resident: int
    total: int
    settings: MemorySettings = field(default_factory=MemorySettings)

    def fits(self, device_bytes: float) -> bool:
        return self.total <= device_bytes

    def table(self) -> str:
        rows = [f"{'component':<18}{'GiB':>10}"]
        rows += [f"{k:<18}{v / GiB:>10.2f}" for k, v in self.components.items()]
        rows += [
            f"{'resident':<18}{self.resident / GiB:>10.2f}",
            f"{'learner phase':<18}{self.learner_peak / GiB:>10.2f}",
            f"{'rollout phase':<18}{self.rollout_peak / GiB:>10.2f}",
            f"{'total':<18}{self.total / GiB:>10.2f}",
        ]
        return "\n".join(rows)


class _Axes:
    """What ``spec_for`` reads of a mesh (its axis sizes), without devices."""

    def __init__(self, fsdp: int):
        self.shape = {"data": 1, "fsdp": fsdp, "tensor": 1}


def param_shapes(cfg: ModelConfig, *, critic: bool = False) -> dict[str, tuple[int, ...]]:
    """Every parameter's path (as in ``nnx.to_pure_dict``) and shape, of the policy or of its critic."""
    d, n, kh, h, f, L = (
        cfg.hidden_size,
        cfg.num_heads,
        cfg.num_kv_heads,
        cfg.head_dim,
        cfg.intermediate_size,
        cfg.num_layers,
    )
    layer = {
        "input_norm": (d,),
        "q_proj": (n, h, d),
        "kv_proj": (2, kh, h, d),
        "o_proj": (d, n, h),
        "post_norm": (d,),
        "gate_up": (2, f, d),
        "down": (d, f),
    }
    if cfg.qkv_bias:
        layer.update(q_bias=(n, h), kv_bias=(2, kh, h))
    if cfg.qk_norm:
        layer.update(q_norm=(h,), k_norm=(h,))
    if cfg.out_bias:
        layer["o_bias"] = (d,)
    shapes = {"model/embed": (cfg.vocab_size, d), "model/final_norm": (d,)}
    shapes.update({f"model/layers/{k}": (L, *s) for k, s in layer.items()})
    if critic:
        shapes.update({"value_head": (d,), "value_bias": ()})
    elif not cfg.tie_word_embeddings:
        shapes["lm_head"] = (cfg.vocab_size, d)
    return shapes


def _count(shapes) -> int:
    return sum(int(np.prod(s)) for s in shapes.values())


def _per_device(shapes, devices: int) -> int:
    """Elements one device holds under DEFAULT_RULES on an fsdp axis of ``devices``."""
    axes = _Axes(devices)
    total = 0
    for path, shape in shapes.items():
        spec = spec_for(path, shape, axes, DEFAULT_RULES)
        split = 1
        for ax in spec:
            for name in (ax if isinstance(ax, tuple) else (ax,)) if ax else ():
                split *= axes.shape[name]
        total += int(np.prod(shape)) // split
    return total


def _layer_elems(cfg: ModelConfig) -> dict[str, int]:
    """Per-token elements of one block's tensors (compute dtype)."""
    d, n, kh, h, f = cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size
    qkv = (n + 2 * kh) * h
    every = 4 * d + qkv + n * h + 3 * f + ((n + kh) * h if cfg.qk_norm else 0)
    dots_no_batch = 3 * d + qkv + 2 * f  # x; q, kv, o_proj and down outputs; gate/up
    return {"every": every, "dots_no_batch": dots_no_batch, "attn_out": n * h, "x": d}


def activation_bytes(cfg: ModelConfig, tokens: int, seq_len: int) -> int:
    """Bytes of the forward/backward activations of ``tokens`` tokens in rows of ``seq_len``: what
    ``cfg.remat`` saves per layer for all layers plus one layer's recomputed working set with its
    cotangents."""
    c = _BYTES[cfg.compute_dtype]
    n, h = cfg.num_heads, cfg.head_dim
    e = _layer_elems(cfg)
    xla = cfg.attention_impl == "xla"
    keys = seq_len if xla else 0  # [heads, T, T] per row: per token, heads x T entries
    # fp32 softmax output, plus the probabilities cast to the compute dtype (the same buffer in fp32) | stats
    probs = 4 + (c if c != 4 else 0)
    quad_saved = n * keys * probs if xla else n * 4
    rope = 4 * h  # fp32 cos and sin [T, H/2] per row
    saved = {
        "none": e["every"] * c + quad_saved + rope,
        "full": e["x"] * c,
        "dots_no_batch": e["dots_no_batch"] * c,
        "dots": e["dots_no_batch"] * c + ((n * keys + e["attn_out"]) * c if xla else 0),
        "save_attn": (e["x"] + e["attn_out"]) * c,
    }[cfg.remat]
    work = 2 * e["every"] * c + quad_saved + n * keys * 8 + rope  # + fp32 cotangents of the scores
    head = 2 * cfg.hidden_size * c  # final norm input and output, kept for the log-prob backward
    return tokens * (cfg.num_layers * saved + work + head)


def logits_bytes(cfg: ModelConfig, tokens: int, chunk_size: int) -> int:
    """Live log-prob logits: [chunk, V] fp32 logits and their exp, plus the compute-dtype cotangent."""
    return min(chunk_size, tokens) * cfg.vocab_size * (8 + _BYTES[cfg.compute_dtype])


def memory_plan(cfg: ModelConfig, settings: MemorySettings | None = None, **overrides) -> MemoryPlan:
    """Bytes per device of training ``cfg`` (its dtypes, remat and attention are the model's runtime fields)
    with ``settings`` (fields may be given as keywords). See the module docstring for the assumptions."""
    s = dataclasses.replace(settings or MemorySettings(), **overrides)
    p = _BYTES[cfg.param_dtype]
    c = _BYTES[cfg.compute_dtype]
    o = _BYTES[s.optimizer_dtype or cfg.param_dtype]
    actor_shapes = param_shapes(cfg)
    critic_shapes = param_shapes(cfg, critic=True) if s.critic else {}
    actor = _per_device(actor_shapes, s.devices)
    critic = _per_device(critic_shapes, s.devices) if s.critic else 0
    trained = actor + critic
    unembed = cfg.vocab_size * cfg.hidden_size // (s.devices if cfg.vocab_size % s.devices == 0 else 1)
    tokens = -(-s.micro_batch_tokens // s.devices)
    comp = {
        "params": trained * p,
        "reference": actor * p if s.reference else 0,
        "optimizer": 2 * trained * o,
        "grads": trained * p * (2 if s.accumulate else 1),
        "grad_workspace": 2 * unembed * p,
        "activations": activation_bytes(cfg, tokens, s.seq_len),
        "critic_activations": activation_bytes(cfg, tokens, s.seq_len) if s.critic else 0,
        "logits": logits_bytes(cfg, tokens, s.chunk_size),
        "optimizer_step": trained * p,
    }
    kv_per_token = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * c
    pages = -(-s.kv_tokens // s.page_size) + 1 if s.kv_tokens else 0
    comp["kv_cache"] = -(-pages * s.page_size * kv_per_token // s.devices)
    comp["rollout_weights"] = actor * c if cfg.param_dtype != cfg.compute_dtype and s.kv_tokens else 0
    rows = -(-s.rollout_rows // s.devices)
    prefill = rows * s.prefill_tokens
    comp["prefill"] = (
        prefill * (_layer_elems(cfg)["every"] * c + kv_per_token + cfg.hidden_size * c)
        + (rows * cfg.num_heads * s.prefill_tokens**2 * (4 + c % 4) if cfg.attention_impl == "xla" else 0)
        + rows * cfg.vocab_size * 4 * 3  # last-position logits, their sort for top-p, the probabilities
    )
    resident = comp["params"] + comp["reference"] + comp["optimizer"]
    activations = comp["activations"] + comp["critic_activations"]  # live together (module docstring)
    backward = comp["grads"] + comp["grad_workspace"] + activations + comp["logits"]
    step = trained * p + comp["optimizer_step"]
    learner = max(backward, step)
    rollout = comp["kv_cache"] + comp["rollout_weights"] + comp["prefill"]
    total = resident + (learner + rollout if s.overlap else max(learner, rollout))
    return MemoryPlan(
        components=comp,
        params_count=_count(actor_shapes),
        critic_params_count=_count(critic_shapes),
        learner_peak=learner,
        rollout_peak=rollout,
        resident=resident,
        total=total,
        settings=s,
    )
