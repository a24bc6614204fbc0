"""DecodeConfig: every way of compiling the decode loop (fused q/k/v or not, XLA or Pallas attention, the
fused RoPE + cache + attention kernel, several steps per loop iteration) generates what the original program
generates, and its options are valid. Pallas kernels run in Pallas' interpreter here."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from models._decode import _k_splits, pallas_decode_attention
from models._fused_decode import fused_decode_attention, rope_cos_sin
from models._layers import apply_rope, cached_attention

# Qwen3-shaped (q/k norms) with q/k/v biases: every branch of the fused kernel's projection.
SMALL = dict(num_layers=2, hidden_size=64, head_dim=32, intermediate_size=128, compute_dtype="float32")
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
    with pytest.raises(ValueError, match="fused_qkv"):
        models.DecodeConfig(attention="fused", fused_qkv=False)
    default = models.DecodeConfig()
    bf16 = cfg.replace(compute_dtype="bfloat16")
    assert default.resolved_attention(cfg, "cpu") == "xla"
    assert default.resolved_attention(bf16, "gpu") == "fused"
    assert default.resolved_attention(bf16, "gpu", sharded=True) == "xla"  # XLA cannot partition Triton calls
    assert models.DecodeConfig(fused_qkv=False).resolved_attention(bf16, "gpu") == "pallas"
    assert default.resolved_attention(bf16.replace(head_dim=16), "gpu") == "pallas"
    assert default.resolved_attention(cfg, "gpu") == "xla"  # fp32 compute: the Triton dots would use TF32
    assert default.resolved_attention(bf16.replace(head_dim=80), "gpu") == "xla"
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
        models.DecodeConfig(attention="pallas"),
        models.DecodeConfig(attention="fused", steps_per_iteration=2),
    ],
    ids=["default", "3_steps", "pallas", "fused_2_steps"],
)
@pytest.mark.slow  # ~62 s on 2 loaded cores (tests/_tiers.py)
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


def _fused_reference(y, positions, inv_freq, kc, vc, kv_start, index, n):
    """The XLA path: RoPE, cache update, masked attention over the whole cache."""
    kh = kc.shape[1]
    q = apply_rope(y[:, None, :n], positions[:, None], inv_freq)
    k = apply_rope(y[:, None, n : n + kh], positions[:, None], inv_freq)
    kc = jax.lax.dynamic_update_slice(kc, k.swapaxes(1, 2), (0, 0, index, 0))
    vc = jax.lax.dynamic_update_slice(vc, y[:, None, n + kh :].swapaxes(1, 2), (0, 0, index, 0))
    slots = jnp.arange(kc.shape[2])
    mask = (slots[None, None] >= kv_start[:, None, None]) & (slots[None, None] <= index)
    return cached_attention(q, kc, vc, mask)[:, 0], kc, vc


@pytest.mark.parametrize(
    ("dtype", "batch", "heads", "kv_heads", "head_dim", "cache_len"),
    [(jnp.float32, 3, 14, 2, 64, 192), (jnp.bfloat16, 2, 8, 1, 128, 64)],
)
@pytest.mark.slow  # ~9 s on 2 loaded cores (tests/_tiers.py)
def test_fused_kernel_matches_rope_cache_update_and_attention(
    dtype, batch, heads, kv_heads, head_dim, cache_len
):
    rng = np.random.RandomState(heads)
    y = jnp.asarray(rng.randn(batch, heads + 2 * kv_heads, head_dim), dtype)
    kc, vc = (jnp.asarray(rng.randn(batch, kv_heads, cache_len, head_dim), dtype) for _ in range(2))
    kv_start = jnp.asarray([0, 37, 5][:batch], jnp.int32)
    index = cache_len - 9  # slots after it are unfilled (garbage here) and must stay untouched
    positions = index - kv_start
    inv_freq = (1.0 / 1e4 ** (np.arange(0, head_dim, 2) / head_dim)).astype(np.float32)
    ref = _fused_reference(y, positions, inv_freq, kc, vc, kv_start, index, heads)
    got = jax.jit(lambda *a: fused_decode_attention(*a, kv_start=kv_start, index=index, num_heads=heads))(
        y, rope_cos_sin(positions, inv_freq), kc, vc
    )
    tol = 1e-5 if dtype == jnp.float32 else 2e-2
    for g, r in zip(got, ref):
        assert g.dtype == dtype and g.shape == r.shape
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(r, np.float32), atol=tol, rtol=0)
