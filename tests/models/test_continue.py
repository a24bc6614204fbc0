"""Multi-turn KV-cache continuation (``Sampler.generate(caches=..., keep_cache=True)``): a continued turn
gives the logits, tokens and log-probs of a full prefill of the whole context (fp32), in batches that mix
rows from different earlier calls and rows without a cache; a prompt that does not extend its cache fails."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import models

SMALL = dict(num_layers=2, hidden_size=64, head_dim=16, intermediate_size=128, compute_dtype="float32")
M = 10
# fp32 throughout: the two paths differ only in summation order (cached vs recomputed keys, different
# matmul shapes), ~1e-6 relative; 2e-5 is the tolerance of the sampler's own log-prob test.
ATOL = 2e-5


@pytest.fixture(scope="module")
def sampler():
    return models.Sampler(
        models.init_model(models.tiny_config(**SMALL), seed=5),
        prompt_buckets=(16, 32, 64),
        batch_buckets=(1, 4),
    )


def _ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(3, 8000, n).tolist()


SAMPLED = models.SamplingConfig(max_new_tokens=M, temperature=1.0, eos_token_ids=())


def _turn(sampler, prompt, seed=0, caches=None):
    out = sampler.generate([prompt], SAMPLED, seed=seed, caches=caches, keep_cache=True)
    return out, prompt + out.response_ids(0)


@pytest.mark.slow  # ~36 s on 2 loaded cores (tests/_tiers.py)
def test_continued_logits_equal_full_forward(sampler):
    prompt = _ids(0, 21)
    out, ctx = _turn(sampler, prompt)
    row = out.caches[0]
    assert row.ids == tuple(ctx[:-1]) and row.length == len(prompt) + M - 1
    ctx = ctx + _ids(1, 9)  # the observation
    model = nnx.merge(sampler.graphdef, sampler.state)
    full = np.asarray(model(jnp.asarray([ctx])))[0, -1]
    cont = sampler.next_token_logits([ctx], caches=[row])[0]
    fresh = sampler.next_token_logits([ctx])[0]
    np.testing.assert_allclose(cont, full, atol=ATOL, rtol=0)
    np.testing.assert_allclose(fresh, full, atol=ATOL, rtol=0)


@pytest.mark.slow  # ~41 s on 2 loaded cores (tests/_tiers.py)
def test_three_turns_match_fresh_prefill_and_prefill_only_new_tokens(sampler):
    ctx, caches = _ids(2, 30), None
    for turn in range(3):
        cont = sampler.generate([ctx], SAMPLED, seed=turn, caches=caches, keep_cache=True)
        fresh = sampler.generate([ctx], SAMPLED, seed=turn)
        assert cont.response_ids(0) == fresh.response_ids(0)
        np.testing.assert_allclose(cont.logprobs, fresh.logprobs, atol=ATOL, rtol=0)
        if turn:
            assert cont.stats["continued"] and cont.stats["new_tokens"] == 1 + 7  # last token + observation
        ctx = ctx + cont.response_ids(0) + _ids(10 + turn, 7)
        caches = cont.caches


@pytest.mark.slow  # ~91 s on 2 loaded cores (tests/_tiers.py)
def test_mixed_batch_rows_from_different_calls(sampler):
    a_out, a = _turn(sampler, _ids(3, 12), seed=1)
    b_out, b = _turn(sampler, _ids(4, 40), seed=2)  # another call, another prompt bucket
    rows = [a + _ids(5, 3), _ids(6, 17), b + _ids(7, 20)]
    greedy = models.SamplingConfig(max_new_tokens=M, temperature=0.0, eos_token_ids=())
    batch = sampler.generate(rows, greedy, caches=[a_out.caches[0], None, b_out.caches[0]], keep_cache=True)
    for i, row in enumerate(rows):
        alone = sampler.generate([row], greedy)
        assert batch.response_ids(i) == alone.response_ids(0), i
        np.testing.assert_allclose(batch.logprobs[i], alone.logprobs[0], atol=ATOL, rtol=0)
    assert batch.stats["new_tokens"] == 4 + 17 + 21
    # the kept caches of a continued batch continue again
    nxt = batch.caches[2]
    ctx = rows[2] + batch.response_ids(2) + [11, 12]
    model = nnx.merge(sampler.graphdef, sampler.state)
    full = np.asarray(model(jnp.asarray([ctx])))[0, -1]
    np.testing.assert_allclose(sampler.next_token_logits([ctx], caches=[nxt])[0], full, atol=ATOL, rtol=0)


def test_prompt_must_extend_its_cache(sampler):
    out, ctx = _turn(sampler, _ids(8, 12))
    bad = list(ctx)
    bad[5] = (bad[5] + 1) % 8000
    with pytest.raises(ValueError, match="does not extend its cached tokens .*token 5"):
        sampler.generate([bad + [1]], SAMPLED, caches=out.caches)
    with pytest.raises(ValueError, match="must add at least one token"):
        sampler.generate([ctx[:-1]], SAMPLED, caches=out.caches)
    with pytest.raises(ValueError, match="caches has 1 entries for 2 prompts"):
        sampler.generate([ctx, ctx], SAMPLED, caches=out.caches)
