"""models: the Flax (NNX) decoder LLM used as policy and critic.

Hugging Face checkpoint loading/saving with numerical parity (Qwen2, Qwen3, Llama 3), a jitted KV-cache
sampler, chunked log-probs, a critic, sharding rules and Orbax checkpoints. See docs/models.md.

    model, config = models.load_hf("/ckpt/Qwen2.5-Coder-1.5B", dtype="bfloat16", attention_impl="cudnn")
    logits = model(tokens)                                  # [B, T] -> [B, T, V] fp32
    out = models.Sampler(model, tokenizer=tok).generate(prompt_ids, models.SamplingConfig(temperature=0.7))
    nxt = sampler.generate([ids + obs], cfg, caches=out.caches, keep_cache=True)  # prefill only ``obs``
    lp = models.token_logprobs(model, tokens)               # [B, T-1] fp32, chunked over tokens
    engine = models.Engine(model, models.EngineConfig(num_slots=8))    # continuous batching, paged KV
    critic = models.Critic.from_policy(model)               # values [B, T], no vocabulary logits
    plan = models.memory_plan(config, models.MemorySettings(micro_batch_tokens=16384))  # bytes per component

May import: the standard library, jax, flax, optax, orbax, numpy, ml_dtypes, safetensors, tokenizers,
transformers (tokenizers only; tests use its torch models as the independent reference).
Must never import: ``research``, ``kernels_env``, ``experiments``, hydra, omegaconf.
"""

from ._build import ModelSpec, build_critic, build_model
from ._checkpoint import restore_checkpoint, save_checkpoint
from ._config import (
    ModelConfig,
    RopeScaling,
    UnsupportedModelError,
    config_from_hf,
    config_to_hf,
    qwen2_0_5b_config,
    tiny_config,
)
from ._continue import CacheRow
from ._critic import Critic, load_critic
from ._decode import DecodeConfig
from ._engine import Engine, EngineConfig, PagesBlocked
from ._generation import SampleOutput, SamplingConfig
from ._hf import CheckpointError, expected_tensors, load_hf, save_hf
from ._logprobs import logprobs_from_hidden, token_logprobs
from ._memory import MemoryPlan, MemorySettings, memory_plan, param_shapes
from ._model import CausalLM, Decoder, KVCache, abstract_model, cast_params, init_model
from ._sampler import Sampler
from ._sampling import sample_tokens, top_k_mask, top_p_mask
from ._sharding import AXES, DEFAULT_RULES, batch_sharding, make_mesh, shard_model, spec_for, state_shardings
from ._slots import Request, Result
from ._tokenizer import TOKENIZER_DIR, default_tokenizer, load_tokenizer, save_tokenizer, train_bpe


def sample(model, prompts, config: SamplingConfig | None = None, *, tokenizer=None, seed: int = 0, **kw):
    """One-off generation (builds a :class:`Sampler`; keep one Sampler around to reuse compilations)."""
    return Sampler(model, tokenizer=tokenizer, **kw).generate(prompts, config, seed=seed)


__all__ = [
    "AXES",
    "DEFAULT_RULES",
    "TOKENIZER_DIR",
    "CacheRow",
    "CausalLM",
    "CheckpointError",
    "Critic",
    "DecodeConfig",
    "Engine",
    "PagesBlocked",
    "EngineConfig",
    "Decoder",
    "KVCache",
    "MemoryPlan",
    "MemorySettings",
    "ModelConfig",
    "ModelSpec",
    "Request",
    "Result",
    "RopeScaling",
    "SampleOutput",
    "Sampler",
    "SamplingConfig",
    "UnsupportedModelError",
    "abstract_model",
    "batch_sharding",
    "build_critic",
    "build_model",
    "cast_params",
    "config_from_hf",
    "config_to_hf",
    "default_tokenizer",
    "expected_tensors",
    "init_model",
    "load_critic",
    "load_hf",
    "load_tokenizer",
    "save_tokenizer",
    "train_bpe",
    "logprobs_from_hidden",
    "make_mesh",
    "memory_plan",
    "param_shapes",
    "qwen2_0_5b_config",
    "restore_checkpoint",
    "sample",
    "sample_tokens",
    "save_checkpoint",
    "save_hf",
    "shard_model",
    "spec_for",
    "state_shardings",
    "tiny_config",
    "token_logprobs",
    "top_k_mask",
    "top_p_mask",
]
