"""Hugging Face parity: logits vs transformers' torch models, bit-exact save/load, sharded checkpoints,
and the KV-cache decode path against the full forward."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from model_fixtures import random_tokens, torch_logits

import models
from models._hf import hf_state


@nnx.jit
def _forward(m, t, a, p):
    return m(t, positions=p, attention_mask=a)


def _logits(model, tokens, attention_mask=None, positions=None):
    return np.asarray(_forward(model, jnp.asarray(tokens), attention_mask, positions))


def _same_params(a, b):
    la, lb = jax.tree.leaves(hf_state(a)), jax.tree.leaves(hf_state(b))
    assert len(la) == len(lb)
    return all(x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y) for x, y in zip(la, lb))


def test_logits_match_transformers_fp32(hf_checkpoint):
    """Row 0 unpadded, row 1 left-padded (padding mask + positions from it), both against transformers."""
    family, path, torch_model = hf_checkpoint
    model, cfg = models.load_hf(path, dtype="float32", compute_dtype="float32")
    assert cfg.family == family
    tokens = random_tokens(2, 40, seed=1)
    mask = np.ones_like(tokens)
    mask[1, :9] = 0
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
    ours = _logits(model, tokens, jnp.asarray(mask), jnp.asarray(positions))
    ref = torch_logits(torch_model, tokens, attention_mask=mask, position_ids=positions)
    assert ours.shape == ref.shape == (2, 40, cfg.vocab_size)
    np.testing.assert_allclose(ours[mask == 1], ref[mask == 1], atol=1e-4, rtol=0)
    # Positions default to the ones derived from the mask.
    np.testing.assert_array_equal(_logits(model, tokens, jnp.asarray(mask)), ours)


def test_unrolled_layers_and_remat_match_scan(checkpoint_of):
    _, path, _ = checkpoint_of("qwen3")  # layer execution is family-independent
    tokens = random_tokens(1, 16, seed=3)
    base, _ = models.load_hf(path, dtype="float32", compute_dtype="float32")
    other, _ = models.load_hf(path, dtype="float32", compute_dtype="float32", scan_layers=False, remat="full")
    np.testing.assert_allclose(_logits(other, tokens), _logits(base, tokens), atol=1e-5, rtol=0)


def test_save_load_bit_exact_and_transformers_reads_it(hf_checkpoint, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    _, path, torch_model = hf_checkpoint
    model, _ = models.load_hf(path, dtype="float32")
    models.save_hf(model, tmp_path / "out")
    again, _ = models.load_hf(tmp_path / "out", dtype="float32")
    assert _same_params(model, again)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype=torch.float32).eval()
    ref_sd, new_sd = torch_model.state_dict(), reloaded.state_dict()
    assert ref_sd.keys() == new_sd.keys()
    for name in ref_sd:
        assert torch.equal(ref_sd[name], new_sd[name]), name


def test_bf16_round_trip_is_bit_exact(hf_checkpoint, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    _, path, _ = hf_checkpoint
    model, cfg = models.load_hf(path, dtype="bfloat16")
    assert cfg.param_dtype == "bfloat16"
    models.save_hf(model, tmp_path / "bf16")
    header = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert header["dtype"] == "bfloat16"
    again, _ = models.load_hf(tmp_path / "bf16")  # dtype from the checkpoint
    assert _same_params(model, again)
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "bf16")
    assert next(hf.parameters()).dtype == torch.bfloat16


def test_sharded_checkpoints_load(hf_checkpoint, tmp_path):
    _, path, torch_model = hf_checkpoint
    model, _ = models.load_hf(path, dtype="float32")
    # Our writer, forced into many shards.
    models.save_hf(model, tmp_path / "ours", max_shard_bytes=20_000)
    index = json.loads((tmp_path / "ours" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 3
    assert not (tmp_path / "ours" / "model.safetensors").exists()
    assert _same_params(model, models.load_hf(tmp_path / "ours", dtype="float32")[0])
    # transformers' writer.
    torch_model.save_pretrained(tmp_path / "theirs", max_shard_size="40KB")
    assert (tmp_path / "theirs" / "model.safetensors.index.json").is_file()
    assert _same_params(model, models.load_hf(tmp_path / "theirs", dtype="float32")[0])


def test_stepwise_decode_reproduces_full_forward(hf_checkpoint):
    """Token by token through the KV cache (left-padded row included) vs the full forward; for one family
    also in chunks of 3 tokens (T > 1 through the cache path)."""
    family, path, _ = hf_checkpoint
    model, cfg = models.load_hf(path, dtype="float32", compute_dtype="float32")
    tokens = random_tokens(2, 12, seed=4)
    mask = np.ones_like(tokens)
    mask[1, :3] = 0
    full = _logits(model, tokens, jnp.asarray(mask))
    kv_start = jnp.asarray([0, 3], jnp.int32)
    step = nnx.jit(lambda m, t, c, i: m.decode(t, c, i, kv_start=kv_start))
    for chunk in (1, 3) if family == "qwen3" else (1,):
        cache = models.KVCache.zeros(cfg, 2, 16, jnp.float32)
        got = []
        for i in range(0, 12, chunk):
            logits, cache = step(model, jnp.asarray(tokens[:, i : i + chunk]), cache, jnp.int32(i))
            got.append(np.asarray(logits))
        got = np.concatenate(got, axis=1)
        np.testing.assert_allclose(got[mask == 1], full[mask == 1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "llama"])
def test_config_round_trip(family):
    from model_fixtures import hf_config

    cfg = models.config_from_hf(hf_config(family).to_dict())
    again = models.config_from_hf(models.config_to_hf(cfg))
    assert again == cfg


@pytest.mark.parametrize("family", ["qwen2", "llama"])  # Qwen3-shaped: test_sampler.py
def test_sampler_on_checkpoint_families(checkpoint_of, family):
    """The decode path's fused q/k/v (with biases) and RoPE scaling: greedy tokens and their log-probs
    equal the full forward's argmax and log-softmax."""
    _, path, _ = checkpoint_of(family)
    model, _ = models.load_hf(path, dtype="float32", compute_dtype="float32")
    prompts = [random_tokens(1, 5, seed=5)[0].tolist(), random_tokens(1, 9, seed=6)[0].tolist()]
    cfg = models.SamplingConfig(max_new_tokens=6, temperature=0.0, eos_token_ids=())
    out = models.Sampler(model, prompt_buckets=(16,), batch_buckets=(2,)).generate(prompts, cfg)
    seqs = np.zeros((2, 16), np.int32)
    for i, p in enumerate(prompts):
        seqs[i, : len(p) + 6] = p + out.tokens[i].tolist()
    logits = _logits(model, seqs)
    for i, p in enumerate(prompts):
        step = logits[i, len(p) - 1 : len(p) + 5]
        assert np.argmax(step, -1).tolist() == out.tokens[i].tolist()
        ref = np.asarray(jax.nn.log_softmax(jnp.asarray(step)))[np.arange(6), out.tokens[i]]
        np.testing.assert_allclose(out.logprobs[i], ref, atol=2e-5)
