"""The jitted KV-cache sampler: log-probs vs a forward pass, determinism, buckets without recompiles,
EOS and stop strings, and the top-k / top-p filters against a numpy reference."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import models

SMALL = dict(num_layers=2, hidden_size=64, head_dim=16, intermediate_size=128, compute_dtype="float32")


@pytest.fixture(scope="module")
def tok():
    return models.default_tokenizer()


@pytest.fixture(scope="module")
def sampler(tok):
    # One batch bucket and every test at max_new_tokens=12: few compilations for the whole module.
    return models.Sampler(
        models.init_model(models.tiny_config(**SMALL), seed=3),
        tokenizer=tok,
        prompt_buckets=(32, 64),
        batch_buckets=(4,),
    )


M = 12
GREEDY = models.SamplingConfig(max_new_tokens=M, temperature=0.0, eos_token_ids=())
SAMPLED = models.SamplingConfig(max_new_tokens=M, temperature=0.7, top_k=40, top_p=0.9)


PROMPTS = ["def add(a, b):\n", "import numpy as np\nx = np.", "__global__ void k(float* y) {"]


def _prompts(tok):
    return [tok.encode(p) for p in PROMPTS]


@nnx.jit
def _next_token_logprobs(model, seqs, temperature):
    return models.token_logprobs(model, seqs, temperature=temperature)


@nnx.jit
def _forward(model, seqs):
    return model(seqs)


def _right_padded(seqs, length=48):
    """One [B, 48] batch (one compilation); right padding never affects earlier positions."""
    out = np.zeros((len(seqs), length), np.int32)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return jnp.asarray(out)


@pytest.mark.slow  # ~10 s on 2 loaded cores (tests/_tiers.py)
def test_logprobs_equal_forward_pass(sampler, tok):
    out = sampler.generate(_prompts(tok), SAMPLED, seed=7)
    model = nnx.merge(sampler.graphdef, sampler.state)
    seqs = [p + out.response_ids(i) for i, p in enumerate(_prompts(tok))]
    recomputed = np.asarray(
        _next_token_logprobs(model, _right_padded(seqs), jnp.float32(SAMPLED.temperature))
    )
    assert out.logprobs.dtype == np.float32
    for i, prompt in enumerate(_prompts(tok)):
        n = out.lengths[i]
        assert n >= 1 and out.mask[i, :n].all() and not out.mask[i, n:].any()
        ref = recomputed[i, len(prompt) - 1 : len(prompt) - 1 + n]
        np.testing.assert_allclose(out.logprobs[i, :n], ref, atol=2e-5, rtol=0)


@pytest.mark.slow  # ~8 s on 2 loaded cores (tests/_tiers.py)
def test_greedy_is_argmax_and_independent_of_batch_companions(sampler, tok):
    batch = sampler.generate(_prompts(tok), GREEDY)
    model = nnx.merge(sampler.graphdef, sampler.state)
    seqs = [p + batch.tokens[i].tolist() for i, p in enumerate(_prompts(tok))]
    logits = np.asarray(_forward(model, _right_padded(seqs)))
    for i, prompt in enumerate(_prompts(tok)):
        alone = sampler.generate([prompt], GREEDY)
        assert alone.tokens[0].tolist() == batch.tokens[i].tolist()
        # Each greedy token is the argmax of the full forward on its prefix (causality: one pass suffices),
        # and its log-prob is that forward's log-softmax (temperature 1).
        n = len(prompt)
        step_logits = logits[i, n - 1 : n - 1 + M]
        assert np.argmax(step_logits, axis=-1).tolist() == batch.tokens[i].tolist()
        ref = np.asarray(jax.nn.log_softmax(jnp.asarray(step_logits)))[np.arange(M), batch.tokens[i]]
        np.testing.assert_allclose(batch.logprobs[i], ref, atol=2e-5, rtol=0)


def test_deterministic_for_a_fixed_key(sampler, tok):
    cfg = dataclasses.replace(SAMPLED, temperature=1.5, eos_token_ids=())
    a = sampler.generate(_prompts(tok), cfg, seed=11)
    b = sampler.generate(_prompts(tok), cfg, seed=11)
    c = sampler.generate(_prompts(tok), cfg, key=jax.random.key(12))
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.logprobs, b.logprobs)
    assert not np.array_equal(a.tokens, c.tokens)


def test_no_recompile_within_a_bucket(sampler, tok):
    sampler.generate(_prompts(tok), SAMPLED)  # the (batch 4, prompt 32) bucket is compiled
    before = dict(sampler.trace_counts)
    sizes = sampler._prefill._cache_size(), sampler._decode._cache_size()
    rng = np.random.RandomState(0)
    for n, length in [(1, 3), (3, 32), (4, 9), (2, 17)]:  # all in the (batch 4, prompt 32) bucket
        prompts = [rng.randint(3, 8192, length).tolist() for _ in range(n)]
        sampler.generate(prompts, SAMPLED, seed=n)
        # Temperature / top_p values / EOS ids are traced values, not compile-time constants.
        sampler.generate(
            prompts, dataclasses.replace(SAMPLED, temperature=0.5, top_p=0.7, eos_token_ids=(5, 6))
        )
    assert sampler.trace_counts == before
    assert (sampler._prefill._cache_size(), sampler._decode._cache_size()) == sizes
    # A new static setting (max_new_tokens=1: a prefill-only program) compiles exactly once more.
    one = dataclasses.replace(GREEDY, max_new_tokens=1)
    sampler.generate(prompts, one)
    expect = {"prefill": before["prefill"] + 1, "decode": before["decode"]}
    assert sampler.trace_counts == expect
    # New weights of the same shapes (an RL update) do not recompile.
    old = sampler.graphdef, sampler.state
    sampler.set_model(models.init_model(models.tiny_config(**SMALL), seed=6))
    try:
        sampler.generate(prompts, one)
        sampler.generate(prompts, SAMPLED)
        assert sampler.trace_counts == expect
    finally:
        sampler.graphdef, sampler.state = old


def test_bucket_rounding():
    from models._sampler import bucket

    assert [bucket(n, (32, 64)) for n in (1, 32, 33, 64, 65, 129)] == [32, 32, 64, 64, 128, 192]


def test_eos_and_max_new_tokens(sampler, tok):
    ref = sampler.generate(_prompts(tok), GREEDY)
    assert ref.finish_reasons == ["length"] * 3 and (ref.lengths == M).all()
    # Make the 4th greedy token of row 0 an EOS id: row 0 stops there, EOS included in the mask.
    eos = int(ref.tokens[0, 3])
    first = [int(np.argmax(row == eos)) if (row == eos).any() else None for row in ref.tokens]
    out = sampler.generate(_prompts(tok), dataclasses.replace(GREEDY, eos_token_ids=(eos,)))
    for i in range(3):
        expect = M if first[i] is None else first[i] + 1
        assert out.lengths[i] == expect
        assert out.finish_reasons[i] == ("length" if first[i] is None else "eos")
        assert out.tokens[i, :expect].tolist() == ref.tokens[i, :expect].tolist()
        assert (out.logprobs[i, expect:] == 0).all() and (out.tokens[i, expect:] == 0).all()
    one = sampler.generate(_prompts(tok), dataclasses.replace(GREEDY, max_new_tokens=1))
    assert one.tokens.shape == (3, 1) and (one.lengths == 1).all() and one.finish_reasons == ["length"] * 3
    assert one.tokens[:, 0].tolist() == ref.tokens[:, 0].tolist()


@pytest.mark.parametrize("interval", [1, 3, 32])
def test_stop_strings(sampler, tok, interval):
    ref = sampler.generate(_prompts(tok), GREEDY)
    # A stop string that first completes inside row 1's 7th..8th tokens (may straddle a token boundary).
    text = tok.decode(ref.response_ids(1))
    start = len(tok.decode(ref.response_ids(1)[:6]))
    stop = text[start : start + 3] or text[-2:]
    assert stop

    def expected(row):  # brute force: the first token whose decoded prefix contains the stop string
        ids = ref.response_ids(row)
        return next((j + 1 for j in range(len(ids)) if stop in tok.decode(ids[: j + 1])), None)

    cfg = dataclasses.replace(GREEDY, stop_strings=(stop,), stop_check_interval=interval)
    out = sampler.generate(_prompts(tok), cfg)
    for i in range(3):
        e = expected(i)
        assert out.lengths[i] == (M if e is None else e), (i, stop)
        assert out.finish_reasons[i] == ("length" if e is None else "stop")
        assert out.tokens[i, : out.lengths[i]].tolist() == ref.tokens[i, : out.lengths[i]].tolist()
    assert expected(1) is not None and expected(1) <= 9


def _np_keep(logits, top_k, top_p):
    """Reference filters in float64: temperature already applied."""
    keep = np.ones_like(logits, bool)
    if top_k:
        kth = np.sort(logits, axis=-1)[:, -top_k][:, None]
        keep &= logits >= kth
    masked = np.where(keep, logits, -np.inf)
    p = np.exp(masked - masked.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    for b in range(p.shape[0]):
        order = np.argsort(-p[b], kind="stable")
        csum = np.cumsum(p[b][order]) - p[b][order]
        kept = order[csum < top_p]
        row = np.zeros_like(keep[b])
        row[kept] = True
        keep[b] &= row
    return keep


@functools.partial(jax.jit, static_argnames=("top_k", "candidates"))
def _keep(logits, top_p, top_k, candidates):
    keep = models.top_k_mask(logits, top_k)
    return keep & models.top_p_mask(jnp.where(keep, logits, -jnp.inf), top_p, candidates=candidates)


@pytest.mark.parametrize(("top_k", "top_p"), [(0, 0.9), (5, 1.0), (20, 0.6), (0, 0.999), (3, 0.2)])
@pytest.mark.slow  # ~8 s on 2 loaded cores (tests/_tiers.py)
def test_topk_topp_masks_match_numpy(top_k, top_p):
    rng = np.random.RandomState(top_k + int(100 * top_p))
    logits = (3 * rng.randn(6, 300)).astype(np.float32)
    ref = _np_keep(logits.astype(np.float64), top_k, top_p)
    for cand in (4, 64, 300):  # the nucleus found among the candidates, or the full-sort fallback
        got = np.asarray(_keep(jnp.asarray(logits), jnp.float32(top_p), top_k=top_k, candidates=cand))
        np.testing.assert_array_equal(got, ref)


def test_sampled_tokens_stay_inside_the_filter():
    rng = np.random.RandomState(0)
    logits = jnp.asarray((2 * rng.randn(4, 200)).astype(np.float32))
    keep = np.asarray(models.top_k_mask(logits, 10)) & np.asarray(
        models.top_p_mask(jnp.where(models.top_k_mask(logits, 10), logits, -jnp.inf), 0.7)
    )
    draw = jax.jit(
        lambda key: models.sample_tokens(
            logits, key, temperature=1.0, top_p=0.7, greedy=False, top_k=10, use_top_p=True
        )
    )
    for s in range(30):
        toks, lps = draw(jax.random.key(s))
        assert keep[np.arange(4), np.asarray(toks)].all()
        ref = np.asarray(jax.nn.log_softmax(logits))[np.arange(4), np.asarray(toks)]
        np.testing.assert_allclose(np.asarray(lps), ref, atol=1e-6)


def test_bad_sampler_inputs(sampler, tok):
    with pytest.raises(ValueError, match="at least one token"):
        sampler.generate([[]])
    with pytest.raises(ValueError, match="token ids"):
        sampler.generate([[1, 10**6]])
    with pytest.raises(ValueError, match="top_p"):
        models.SamplingConfig(top_p=0.0)
    with pytest.raises(ValueError, match="tokenizer"):
        models.Sampler(nnx.merge(sampler.graphdef, sampler.state)).generate(
            [[1, 2]], models.SamplingConfig(stop_strings=("x",))
        )
