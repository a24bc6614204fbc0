"""Typed model configuration: architecture (read from / written to a Hugging Face config.json) plus runtime
choices (parameter and compute dtypes, attention implementation, remat policy, layer scan).

The dataclasses are plain (not frozen) so Hydra/OmegaConf can fill them, but hashable (``unsafe_hash``) so a
config can be a static attribute of a module or a static jit argument: treat them as immutable and derive
variants with :func:`dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp

FAMILIES = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}
ATTENTION_IMPLS = ("xla", "cudnn")
REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch", "save_attn")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
ROPE_TYPES = ("llama3", "linear")


class UnsupportedModelError(ValueError):
    """A checkpoint whose architecture or options this package does not implement."""


def dtype_name(dtype: Any) -> str:
    """Canonical name ('float32', 'bfloat16', 'float16') of a dtype given as a string, numpy or jax dtype."""
    name = dtype if isinstance(dtype, str) else jnp.dtype(dtype).name
    name = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}.get(name, name)
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    return name


@dataclass(unsafe_hash=True)
class RopeScaling:
    """RoPE frequency scaling. ``llama3``: Llama 3.1 piecewise scaling; ``linear``: positions / factor."""

    rope_type: str = "llama3"
    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    def __post_init__(self):
        if self.rope_type not in ROPE_TYPES:
            raise UnsupportedModelError(
                f"unsupported rope scaling type {self.rope_type!r}; supported: {ROPE_TYPES} (or none)"
            )


@dataclass(unsafe_hash=True)
class ModelConfig:
    """A decoder-only transformer of the Qwen2 / Qwen3 / Llama 3 family.

    The default is the tiny embedded model (with the bundled BPE tokenizer's vocabulary) used by the demo
    and the tests.
    """

    family: str = "qwen3"  # qwen2 | qwen3 | llama
    vocab_size: int = 8192
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 768
    rope_theta: float = 1_000_000.0
    rope_scaling: RopeScaling | None = None
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = True
    qkv_bias: bool = False  # Qwen2: True
    out_bias: bool = False  # bias of o_proj (Llama/Qwen3 attention_bias)
    qk_norm: bool = True  # Qwen3: RMSNorm of q and k over head_dim before RoPE
    max_position_embeddings: int = 4096
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = (0,)  # the bundled tokenizer's <|endoftext|>
    pad_token_id: int | None = 0
    initializer_range: float = 0.02
    # Runtime choices (not part of the checkpoint).
    param_dtype: str = "float32"
    compute_dtype: str = "bfloat16"
    attention_impl: str = "xla"  # xla (everywhere) | cudnn (fused flash attention, GPU only)
    remat: str = "none"  # none | full | dots | dots_no_batch | save_attn
    scan_layers: bool = True  # lax.scan over stacked layers: compile time independent of depth

    def __post_init__(self):
        self.eos_token_ids = tuple(int(t) for t in (self.eos_token_ids or ()))
        if isinstance(self.rope_scaling, dict):
            self.rope_scaling = RopeScaling(**self.rope_scaling)
        self.param_dtype = dtype_name(self.param_dtype)
        self.compute_dtype = dtype_name(self.compute_dtype)
        problems = []
        if self.family not in FAMILIES:
            problems.append(f"family {self.family!r} not in {sorted(FAMILIES)}")
        if self.attention_impl not in ATTENTION_IMPLS:
            problems.append(f"attention_impl {self.attention_impl!r} not in {ATTENTION_IMPLS}")
        if self.remat not in REMAT_POLICIES:
            problems.append(f"remat {self.remat!r} not in {REMAT_POLICIES}")
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_kv_heads > 0 and self.num_heads % self.num_kv_heads:
            problems.append(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2:
            problems.append(f"head_dim must be even for RoPE, got {self.head_dim}")
        if problems:
            raise ValueError("invalid ModelConfig: " + "; ".join(problems))

    @property
    def param_jnp_dtype(self):
        return DTYPES[self.param_dtype]

    @property
    def compute_jnp_dtype(self):
        return DTYPES[self.compute_dtype]

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def num_params(self, include_embedding: bool = True) -> int:
        d, f, h = self.hidden_size, self.intermediate_size, self.head_dim
        attn = d * h * (self.num_heads + 2 * self.num_kv_heads) + self.num_heads * h * d
        attn += (self.num_heads + 2 * self.num_kv_heads) * h if self.qkv_bias else 0
        attn += d if self.out_bias else 0
        attn += 2 * h if self.qk_norm else 0
        per_layer = attn + 3 * d * f + 2 * d
        total = self.num_layers * per_layer + d
        if include_embedding:
            total += self.vocab_size * d * (1 if self.tie_word_embeddings else 2)
        return total


def tiny_config(**overrides) -> ModelConfig:
    """The tiny embedded default: Qwen3-shaped, 4 layers of width 256, the bundled tokenizer's vocabulary."""
    return ModelConfig(**overrides)


def qwen2_0_5b_config(**overrides) -> ModelConfig:
    """Qwen2.5-0.5B's shape (494M parameters, tied embeddings); the benchmarks' model."""
    base = dict(
        family="qwen2",
        vocab_size=151936,
        hidden_size=896,
        num_layers=24,
        num_heads=14,
        num_kv_heads=2,
        head_dim=64,
        intermediate_size=4864,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        qkv_bias=True,
        out_bias=False,
        qk_norm=False,
        max_position_embeddings=32768,
        eos_token_ids=(151643,),
        pad_token_id=151643,
    )
    base.update(overrides)
    return ModelConfig(**base)


# --- Hugging Face config.json <-> ModelConfig --------------------------------------------------------------


def _rope_from_hf(hf: dict) -> tuple[float, RopeScaling | None]:
    params = hf.get("rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params:  # transformers >= 5
        theta = float(params["rope_theta"])
        scaling = params
    else:  # the format of checkpoints on the Hub
        theta = float(hf.get("rope_theta", 10000.0))
        scaling = hf.get("rope_scaling") or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type in (None, "default"):
        return theta, None
    if rope_type not in ROPE_TYPES:
        raise UnsupportedModelError(
            f"unsupported rope scaling {rope_type!r}; supported: default, {ROPE_TYPES}"
        )
    keep = {f.name for f in dataclasses.fields(RopeScaling)} - {"rope_type"}
    kwargs = {k: v for k, v in scaling.items() if k in keep}
    return theta, RopeScaling(rope_type=rope_type, **kwargs)


def config_from_hf(hf: dict, **runtime) -> ModelConfig:
    """Our config from a Hugging Face ``config.json`` dict; ``runtime`` sets the runtime fields."""
    model_type = hf.get("model_type")
    if model_type not in FAMILIES:
        archs = hf.get("architectures")
        raise UnsupportedModelError(
            f"unsupported architecture: model_type={model_type!r} architectures={archs}; "
            f"supported model types: {sorted(FAMILIES)}"
        )
    if hf.get("hidden_act", "silu") != "silu":
        raise UnsupportedModelError(f"unsupported hidden_act {hf.get('hidden_act')!r} (only silu)")
    if hf.get("use_sliding_window") or "sliding_attention" in (hf.get("layer_types") or []):
        raise UnsupportedModelError("sliding-window attention layers are not supported")
    if hf.get("mlp_bias"):
        raise UnsupportedModelError("mlp_bias=True is not supported")
    if hf.get("partial_rotary_factor", 1.0) != 1.0:
        raise UnsupportedModelError("partial rotary embeddings are not supported")
    missing = [
        k
        for k in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
        )
        if k not in hf
    ]
    if missing:
        raise ValueError(f"config.json lacks required keys {missing}")
    theta, scaling = _rope_from_hf(hf)
    heads = int(hf["num_attention_heads"])
    eos = hf.get("eos_token_id")
    eos = () if eos is None else tuple(eos) if isinstance(eos, list | tuple) else (int(eos),)
    attention_bias = bool(hf.get("attention_bias", False))
    hf_dtype = hf.get("dtype") or hf.get("torch_dtype")
    if "param_dtype" not in runtime and hf_dtype in DTYPES:
        runtime["param_dtype"] = hf_dtype
    return ModelConfig(
        family=model_type,
        vocab_size=int(hf["vocab_size"]),
        hidden_size=int(hf["hidden_size"]),
        num_layers=int(hf["num_hidden_layers"]),
        num_heads=heads,
        num_kv_heads=int(hf.get("num_key_value_heads") or heads),
        head_dim=int(hf.get("head_dim") or hf["hidden_size"] // heads),
        intermediate_size=int(hf["intermediate_size"]),
        rope_theta=theta,
        rope_scaling=scaling,
        rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),  # transformers: False for all three
        qkv_bias=True if model_type == "qwen2" else attention_bias,
        out_bias=False if model_type == "qwen2" else attention_bias,
        qk_norm=model_type == "qwen3",
        max_position_embeddings=int(hf.get("max_position_embeddings", 4096)),
        bos_token_id=hf.get("bos_token_id"),
        eos_token_ids=eos,
        pad_token_id=hf.get("pad_token_id"),
        initializer_range=float(hf.get("initializer_range", 0.02)),
        **runtime,
    )


def config_to_hf(cfg: ModelConfig, base: dict | None = None, dtype: str | None = None) -> dict:
    """A ``config.json`` dict transformers loads (legacy rope keys, which every transformers version reads).

    ``base`` (the checkpoint's original dict, if any) keeps keys we do not model, e.g. ``use_cache``."""
    if cfg.family == "qwen2" and (not cfg.qkv_bias or cfg.out_bias or cfg.qk_norm):
        raise UnsupportedModelError("a qwen2 model has q/k/v biases, no o_proj bias and no q/k norm")
    if cfg.family == "qwen3" and (not cfg.qk_norm or cfg.qkv_bias != cfg.out_bias):
        raise UnsupportedModelError("a qwen3 model has q/k norm and one attention_bias for q/k/v/o")
    if cfg.family == "llama" and (cfg.qk_norm or cfg.qkv_bias != cfg.out_bias):
        raise UnsupportedModelError("a llama model has no q/k norm and one attention_bias for q/k/v/o")
    hf = dict(base or {})
    for key in ("rope_parameters", "rope_scaling", "torch_dtype", "transformers_version"):
        hf.pop(key, None)
    eos = list(cfg.eos_token_ids)
    hf.update(
        architectures=[FAMILIES[cfg.family]],
        model_type=cfg.family,
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        intermediate_size=cfg.intermediate_size,
        hidden_act="silu",
        rope_theta=cfg.rope_theta,
        rms_norm_eps=cfg.rms_norm_eps,
        tie_word_embeddings=cfg.tie_word_embeddings,
        max_position_embeddings=cfg.max_position_embeddings,
        bos_token_id=cfg.bos_token_id,
        eos_token_id=(eos[0] if len(eos) == 1 else eos) if eos else None,
        pad_token_id=cfg.pad_token_id,
        initializer_range=cfg.initializer_range,
        dtype=dtype or cfg.param_dtype,
    )
    if cfg.rope_scaling is not None:
        scaling = dataclasses.asdict(cfg.rope_scaling)
        if cfg.rope_scaling.rope_type == "linear":
            scaling = {"rope_type": "linear", "factor": scaling["factor"]}
        hf["rope_scaling"] = scaling
    if cfg.family != "qwen2":
        hf["attention_bias"] = cfg.qkv_bias
    if cfg.family == "llama":
        hf["mlp_bias"] = False
    else:
        hf.setdefault("use_sliding_window", False)
    return hf
