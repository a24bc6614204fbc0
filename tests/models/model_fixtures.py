"""Helpers for the models tests: tiny random Hugging Face models of every family, built offline."""

from __future__ import annotations

import numpy as np

FAMILIES = ("qwen2", "qwen3", "llama")
VOCAB = 97


def hf_config(family: str, **overrides):
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    common = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        max_position_embeddings=256,
    )
    if family == "qwen2":  # q/k/v biases, tied embeddings
        cfg = Qwen2Config(**common, tie_word_embeddings=True, rope_theta=10000.0)
    elif family == "qwen3":  # q/k norm, head_dim != hidden / heads, untied
        cfg = Qwen3Config(**common, head_dim=32, tie_word_embeddings=False)
    else:  # Llama 3.1 rope scaling (small original context so scaling matters), attention biases, untied
        rope = {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        }
        cfg = LlamaConfig(
            **common, rope_scaling=rope, rope_theta=500000.0, attention_bias=True, tie_word_embeddings=False
        )
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def build_torch_model(family: str, seed: int = 0, **overrides):
    """A transformers model with every parameter perturbed (norm weights and biases are not trivial)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(hf_config(family, **overrides)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def torch_logits(model, tokens, attention_mask=None, position_ids=None):
    import torch

    kw = {}
    if attention_mask is not None:
        kw["attention_mask"] = torch.as_tensor(np.asarray(attention_mask))
    if position_ids is not None:
        kw["position_ids"] = torch.as_tensor(np.asarray(position_ids))
    with torch.no_grad():
        return model(torch.as_tensor(np.asarray(tokens)), **kw).logits.float().numpy()


def random_tokens(batch: int, length: int, seed: int = 0, vocab: int = VOCAB) -> np.ndarray:
    return np.random.RandomState(seed).randint(0, vocab, (batch, length)).astype(np.int32)
