"""GPU-only checks: cuDNN fused attention vs XLA (values and gradients, with and without padding), fp32 and
bf16 parity with transformers on the GPU, the sampler with cuDNN prefill, the Triton decode kernels and every
decode configuration (WHILE command buffers), and a training step that learns.

Run with XLA_PYTHON_CLIENT_PREALLOCATE=false (scripts/gpu_models.sh does) so torch and JAX share the GPU."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from flax import nnx  # noqa: E402
from model_fixtures import build_torch_model, random_tokens  # noqa: E402

import models  # noqa: E402

pytestmark = pytest.mark.gpu

CFG = models.tiny_config(
    vocab_size=1000,
    num_layers=2,
    hidden_size=256,
    num_heads=8,
    num_kv_heads=2,
    head_dim=64,
    intermediate_size=512,
    param_dtype="float32",
    compute_dtype="bfloat16",
)


# |sampler log-prob - recomputing forward| in bf16 for this model: at most 0.0115 over 8,192 generated tokens
# (4 initialisations x 4 decode configurations x greedy and T=0.8) on an H200, 2026-12-01
# (benchmarks/models/logprob_numerics.py, docs/results/logprob_numerics.md); the tolerance is about 2x that.
LOGPROB_ATOL = 0.025


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-6))


def test_jax_sees_a_gpu():
    assert jax.default_backend() == "gpu", jax.devices()


def test_cudnn_attention_matches_xla():
    """The training path (causal, no padding mask): log-probs and every gradient."""
    tokens = jnp.asarray(random_tokens(2, 256, seed=0, vocab=1000))
    out = {}
    for impl in ("xla", "cudnn"):
        model = models.init_model(CFG.replace(attention_impl=impl), seed=0)

        def loss(m):
            lp = models.token_logprobs(m, tokens)
            return -jnp.mean(lp), lp

        (value, lp), grads = nnx.jit(nnx.value_and_grad(loss, has_aux=True))(model)
        out[impl] = (float(value), np.asarray(lp), nnx.to_pure_dict(grads))
    (vx, lpx, gx), (vc, lpc, gc) = out["xla"], out["cudnn"]
    assert abs(vx - vc) < 1e-2 * abs(vx)
    assert _rel(lpc, lpx) < 2e-2
    for a, b in zip(jax.tree.leaves(gc), jax.tree.leaves(gx)):
        assert _rel(a, b) < 5e-2


def test_cudnn_attention_with_padding_matches_xla():
    """A left-padding mask (the cuDNN path turns it into an additive bias)."""
    tokens = jnp.asarray(random_tokens(2, 256, seed=1, vocab=1000))
    mask = np.ones((2, 256), np.int32)
    mask[1, :37] = 0
    fn = nnx.jit(lambda m, t, a: models.token_logprobs(m, t, attention_mask=a))
    lps = {
        impl: np.asarray(
            fn(models.init_model(CFG.replace(attention_impl=impl), seed=0), tokens, jnp.asarray(mask))
        )
        for impl in ("xla", "cudnn")
    }
    real = mask[:, 1:] == 1
    assert _rel(lps["cudnn"][real], lps["xla"][real]) < 2e-2


def test_fp32_logits_match_transformers_on_gpu(tmp_path):
    import torch

    torch_model = build_torch_model("qwen3")
    torch_model.save_pretrained(tmp_path)
    tokens = random_tokens(2, 48, seed=1)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        ref = torch_model.cuda()(torch.as_tensor(tokens).cuda()).logits.float().cpu().numpy()
    model, _ = models.load_hf(tmp_path, dtype="float32", compute_dtype="float32")
    with jax.default_matmul_precision("highest"):
        ours = np.asarray(nnx.jit(lambda m, t: m(t))(model, jnp.asarray(tokens)))
    np.testing.assert_allclose(ours, ref, atol=1e-4, rtol=0)


def test_bf16_logits_close_to_transformers_bf16(tmp_path):
    import torch

    torch_model = build_torch_model("qwen2").to(torch.bfloat16)
    torch_model.save_pretrained(tmp_path)
    tokens = random_tokens(2, 48, seed=2)
    with torch.no_grad():
        ref = torch_model.cuda()(torch.as_tensor(tokens).cuda()).logits.float().cpu().numpy()
    for impl in ("xla", "cudnn"):
        model, cfg = models.load_hf(tmp_path, attention_impl=impl)
        assert cfg.param_dtype == "bfloat16"
        ours = np.asarray(nnx.jit(lambda m, t: m(t))(model, jnp.asarray(tokens)))
        assert _rel(ours, ref) < 3e-2, impl


def test_sampler_with_cudnn_prefill():
    model = models.init_model(CFG.replace(attention_impl="cudnn", compute_dtype="bfloat16"), seed=1)
    sampler = models.Sampler(model)
    prompts = [random_tokens(1, n, seed=n, vocab=1000)[0].tolist() for n in (5, 30, 17)]
    cfg = models.SamplingConfig(max_new_tokens=16, temperature=0.8, top_p=0.9, eos_token_ids=())
    out = sampler.generate(prompts, cfg, seed=0)
    again = sampler.generate(prompts, cfg, seed=0)
    assert np.array_equal(out.tokens, again.tokens)
    seqs = np.zeros((3, 64), np.int32)
    for i, p in enumerate(prompts):
        seqs[i, : len(p) + 16] = p + out.tokens[i].tolist()
    lp = np.asarray(
        nnx.jit(lambda m, t: models.token_logprobs(m, t, temperature=0.8))(model, jnp.asarray(seqs))
    )
    for i, p in enumerate(prompts):
        np.testing.assert_allclose(out.logprobs[i], lp[i, len(p) - 1 : len(p) + 15], atol=LOGPROB_ATOL)


@pytest.mark.parametrize(("batch", "cache_len"), [(4, 256), (1, 2048)])  # one split; 2 splits of 1024 keys
def test_pallas_decode_attention_kernel_matches_xla(batch, cache_len):
    from models._decode import pallas_decode_attention
    from models._layers import cached_attention

    rng = np.random.RandomState(batch)
    q = jnp.asarray(rng.randn(batch, 1, 14, 64), jnp.bfloat16)  # Qwen2.5-0.5B's 7 query heads per kv head
    kc, vc = (jnp.asarray(rng.randn(batch, 2, cache_len, 64), jnp.bfloat16) for _ in range(2))
    kv_start = jnp.asarray([0, 3, 50, 7][:batch], jnp.int32)
    index = cache_len - 70
    slots = jnp.arange(cache_len)
    mask = (slots[None, None] >= kv_start[:, None, None]) & (slots[None, None] <= index)
    ref = jax.jit(cached_attention)(q, kc, vc, mask)
    got = jax.jit(pallas_decode_attention)(
        q, kc, vc, kv_start=kv_start, kv_len=jnp.full((batch,), index + 1, jnp.int32)
    )
    assert _rel(got, ref) < 2e-2


def test_fused_decode_kernel_matches_xla():
    """The fused RoPE + cache append + attention kernel (Triton) vs the XLA ops it replaces, in bf16."""
    from models._fused_decode import fused_decode_attention, rope_cos_sin
    from models._layers import apply_rope

    b, n, kh, h, s = 8, 14, 2, 64, 256
    rng = np.random.RandomState(0)
    y = jnp.asarray(rng.randn(b, n + 2 * kh, h), jnp.bfloat16)
    kc, vc = (jnp.asarray(rng.randn(b, kh, s, h), jnp.bfloat16) for _ in range(2))
    kv_start = jnp.asarray(rng.randint(0, 60, b), jnp.int32)
    index = 200
    positions = index - kv_start
    inv_freq = (1.0 / 1e6 ** (np.arange(0, h, 2) / h)).astype(np.float32)

    @jax.jit
    def reference(y, kc, vc):
        from models._layers import cached_attention

        q = apply_rope(y[:, None, :n], positions[:, None], inv_freq)
        k = apply_rope(y[:, None, n : n + kh], positions[:, None], inv_freq)
        kc = jax.lax.dynamic_update_slice(kc, k.swapaxes(1, 2), (0, 0, index, 0))
        vc = jax.lax.dynamic_update_slice(vc, y[:, None, n + kh :].swapaxes(1, 2), (0, 0, index, 0))
        slots = jnp.arange(s)
        mask = (slots[None, None] >= kv_start[:, None, None]) & (slots[None, None] <= index)
        return cached_attention(q, kc, vc, mask)[:, 0], kc, vc

    ref = reference(y, kc, vc)
    got = jax.jit(lambda *a: fused_decode_attention(*a, kv_start=kv_start, index=index, num_heads=n))(
        y, rope_cos_sin(positions, inv_freq), kc, vc
    )
    assert _rel(got[0], ref[0]) < 2e-2
    np.testing.assert_array_equal(np.asarray(got[2], np.float32), np.asarray(ref[2], np.float32))
    assert _rel(got[1], ref[1]) < 1e-2  # the rotated key: fp32 RoPE, rounding order may differ


def test_decode_configurations_on_gpu():
    """Each decode configuration compiles here (this XLA accepts the WHILE command-buffer option, the Pallas
    kernel lowers inside the loop) and its greedy log-probs equal a recomputing forward pass."""
    model = models.init_model(CFG, seed=4)
    default = models.DecodeConfig()
    assert default.resolved_attention(CFG) == "fused"
    assert "WHILE" in default.compiler_options().get("xla_gpu_enable_command_buffer", ""), (
        "this XLA rejected the WHILE command-buffer option"
    )
    prompts = [random_tokens(1, n, seed=n, vocab=1000)[0].tolist() for n in (5, 30, 17)]
    sc = models.SamplingConfig(max_new_tokens=16, temperature=0.0, eos_token_ids=())
    sampler = models.Sampler(model)
    logprobs = nnx.jit(lambda m, t: models.token_logprobs(m, t))
    configs = [  # the XLA-only knobs (command buffers off, XLA attention) are covered by the benchmark sweep
        models.DecodeConfig(fused_qkv=False, attention="xla", command_buffers="default"),
        default,
        models.DecodeConfig(attention="pallas"),
        models.DecodeConfig(steps_per_iteration=2),
    ]
    for decode in configs:
        sampler.set_decode_config(decode)
        out = sampler.generate(prompts, sc)
        assert (out.lengths == 16).all(), decode
        seqs = np.zeros((3, 64), np.int32)
        for i, p in enumerate(prompts):
            seqs[i, : len(p) + 16] = p + out.tokens[i].tolist()
        lp = np.asarray(logprobs(model, jnp.asarray(seqs)))
        for i, p in enumerate(prompts):
            np.testing.assert_allclose(
                out.logprobs[i], lp[i, len(p) - 1 : len(p) + 15], atol=LOGPROB_ATOL, err_msg=str(decode)
            )


def test_training_step_learns_with_cudnn_and_remat():
    import optax

    model = models.init_model(CFG.replace(attention_impl="cudnn", remat="dots_no_batch"), seed=2)
    graphdef, params = nnx.split(model)
    tx = optax.adamw(3e-3)
    opt = tx.init(params)
    tokens = jnp.asarray(random_tokens(4, 128, seed=3, vocab=1000))

    @jax.jit
    def step(params, opt):
        def loss_fn(p):
            return -jnp.mean(models.token_logprobs(nnx.merge(graphdef, p), tokens))

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, loss

    losses = []
    for _ in range(8):
        params, opt, loss = step(params, opt)
        losses.append(float(loss))
    assert np.isfinite(losses).all() and losses[-1] < losses[0] - 0.5, losses
