"""DecodeConfig: every way of compiling the decode loop (fused q/k/v or not, XLA or Pallas attention, several
steps per loop iteration) generates what the original program generates, and its options are valid."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from models._decode import _k_splits, pallas_decode_attention
from models._layers import cached_attention

SMALL = dict(num_layers=2, hidden_size=64, head_dim=16, intermediate_size=128, compute_dtype="float32")
M = 12
PROMPTS = [[5, 17, 300, 41], [7] * 20, [901, 902, 903, 904, 905, 906, 907, 1000, 3]]
ORIGINAL = models.DecodeConfig(fused_qkv=False, attention="xla", command_buffers="default")
GREEDY = models.SamplingConfig(max_new_tokens=M, temperature=0.0, eos_token_ids=())
SAMPLED = models.SamplingConfig(max_new_tokens=M, temperature=0.8, top_k=50, top_p=0.9)


@pytest.fixture(scope="module")
def run():
    """generate(PROMPTS) under a DecodeConfig and SamplingConfig, memoised: one Sampler switches between
    decode configurations, so programs (the prefill especially) are shared across the tests."""
    model = models.init_model(models.tiny_config(**SMALL, qkv_bias=True), seed=5)
    sampler = models.Sampler(
        model, tokenizer=models.default_tokenizer(), prompt_buckets=(32,), batch_buckets=(4,)
    )
    memo = {}

    def run(decode, config):
        if (decode, config) not in memo:
            sampler.set_decode_config(decode)
            memo[decode, config] = sampler.generate(PROMPTS, config, seed=3)
        return memo[decode, config]

    run.tokenizer = sampler.tokenizer
    return run


def _same(a, b):
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.lengths, b.lengths)
    assert a.finish_reasons == b.finish_reasons
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5, rtol=0)


def test_decode_config_validation_and_options():
    with pytest.raises(ValueError, match="attention"):
        models.DecodeConfig(attention="flash")
    with pytest.raises(ValueError, match="command_buffers"):
        models.DecodeConfig(command_buffers="graphs")
    with pytest.raises(ValueError, match="steps_per_iteration"):
        models.DecodeConfig(steps_per_iteration=0)
    cfg = models.tiny_config(**SMALL)
    default = models.DecodeConfig()
    assert default.resolved_attention(cfg, "cpu") == "xla"
    assert default.resolved_attention(cfg.replace(compute_dtype="bfloat16"), "gpu") == "pallas"
    assert default.resolved_attention(cfg, "gpu") == "xla"  # fp32 compute: the Triton dot would use TF32
    assert default.resolved_attention(cfg.replace(head_dim=80, compute_dtype="bfloat16"), "gpu") == "xla"
    assert default.compiler_options("cpu") == {}
    assert models.DecodeConfig(command_buffers="default").compiler_options("gpu") == {}
    assert models.DecodeConfig(command_buffers="off").compiler_options("gpu") == {
        "xla_gpu_enable_command_buffer": ""
    }
    # The WHILE spelling is one this XLA parses (compiled here on the CPU backend).
    types = default.compiler_options("gpu")["xla_gpu_enable_command_buffer"].split(",")
    assert {"FUSION", "CUBLAS", "WHILE", "CONDITIONAL"} <= set(types)
    with pytest.raises(TypeError, match="DecodeConfig"):
        models.Sampler(models.init_model(cfg), decode="pallas")


@pytest.mark.parametrize(
    "decode",
    [
        models.DecodeConfig(),  # on the CPU: fused q/k/v, XLA attention
        models.DecodeConfig(steps_per_iteration=3),
        models.DecodeConfig(attention="pallas"),  # Pallas' interpreter off the GPU
    ],
    ids=["default", "3_steps", "pallas"],
)
def test_decode_variants_reproduce_the_original_program(run, decode):
    # Sampling (top-k, top-p's conditional inside the loop) once; the other variants change only the model.
    for config in (GREEDY, SAMPLED) if decode == models.DecodeConfig() else (GREEDY,):
        _same(run(decode, config), run(ORIGINAL, config))


def test_unrolled_steps_stop_where_single_steps_stop(run):
    """EOS and stop-string checks land inside an iteration of 3 steps (interval 4, EOS mid-way)."""
    tok = run.tokenizer
    ref = run(ORIGINAL, GREEDY)
    eos = int(ref.tokens[0, 4])
    text = tok.decode(ref.response_ids(2))
    stop = text[len(tok.decode(ref.response_ids(2)[:5])) :][:2] or text[-1:]
    cfg = dataclasses.replace(GREEDY, eos_token_ids=(eos,), stop_strings=(stop,), stop_check_interval=4)
    single = run(ORIGINAL, cfg)
    assert "eos" in single.finish_reasons and "stop" in single.finish_reasons
    _same(run(models.DecodeConfig(steps_per_iteration=3), cfg), single)


@pytest.mark.parametrize(
    ("dtype", "batch", "cache_len"),
    [(jnp.float32, 3, 64), (jnp.bfloat16, 1, 1024)],  # one split; 2 splits of 512 keys
)
def test_pallas_decode_attention_matches_xla(dtype, batch, cache_len):
    n, kh, h = 8, 2, 16
    rng = np.random.RandomState(batch)
    q = jnp.asarray(rng.randn(batch, 1, n, h), dtype)
    kc, vc = (jnp.asarray(rng.randn(batch, kh, cache_len, h), dtype) for _ in range(2))
    kv_start = jnp.asarray([0, 5, 40][:batch], jnp.int32)
    index = cache_len - 20  # the newest key; the slots after it are unfilled (garbage here)
    slots = jnp.arange(cache_len)
    mask = (slots[None, None] >= kv_start[:, None, None]) & (slots[None, None] <= index)
    ref = cached_attention(q, kc, vc, mask)
    got = jax.jit(pallas_decode_attention)(
        q, kc, vc, kv_start=kv_start, kv_len=jnp.full((batch,), index + 1, jnp.int32)
    )
    assert got.dtype == dtype and got.shape == ref.shape
    tol = 1e-5 if dtype == jnp.float32 else 2e-2
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(ref, np.float32), atol=tol)
    assert _k_splits(batch * kh, cache_len) == (1 if cache_len == 64 else 2)
    assert _k_splits(64 * kh, 1024) == 1 and _k_splits(2, 256) == 1 and _k_splits(2, 64 * 68) == 4
