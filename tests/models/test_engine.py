"""models.Engine (continuous batching over a paged KV pool): greedy tokens and log-probs equal one-at-a-time
``Sampler.generate`` while slots are refilled; prefix sharing and multi-turn continuation give what separate
prompts / a fresh prefill of the whole context give; the KV budget makes requests wait or fail clearly."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import models
from models import _paged

# A larger init than the default: the default tiny random model greedily repeats the prompt's last token,
# which would make token equality a weak check.
SMALL = dict(
    num_layers=2,
    hidden_size=64,
    head_dim=16,
    intermediate_size=128,
    compute_dtype="float32",
    initializer_range=0.3,
)
M = 10
# fp32 throughout: the engine's paged attention and the Sampler's prefill differ only in summation order;
# the tolerance of the sampler's own log-prob tests.
ATOL = 2e-5
GREEDY = models.SamplingConfig(max_new_tokens=M, temperature=0.0, eos_token_ids=())
SAMPLED = models.SamplingConfig(max_new_tokens=M, temperature=1.0, top_k=50, top_p=0.95, eos_token_ids=())
ENGINE = models.EngineConfig(
    num_slots=2, page_size=8, kv_budget_tokens=512, max_seq_len=128, segment_steps=4, prefill_buckets=(32,)
)


@pytest.fixture(scope="module")
def model():
    return models.init_model(models.tiny_config(**SMALL), seed=5)


@pytest.fixture(scope="module")
def sampler(model):
    return models.Sampler(model, prompt_buckets=(32,), batch_buckets=(1,))


@pytest.fixture(scope="module")
def engine(model):
    return models.Engine(model, ENGINE)


def _ids(seed: int, n: int) -> list[int]:
    return np.random.default_rng(seed).integers(3, 8000, n).tolist()


PROMPTS = [_ids(i, n) for i, n in enumerate((5, 23, 9, 30, 3))]


@pytest.mark.slow  # ~25 s on 2 loaded cores: both paths compiled (tests/_tiers.py)
def test_greedy_equals_sampler_one_at_a_time_with_refills_and_eos(engine, sampler):
    free = [sampler.generate([p], GREEDY) for p in PROMPTS]
    ids = free[1].response_ids(0)
    j = next(j for j in range(3, M - 1) if ids[j] not in ids[:j])  # a first occurrence mid-response
    eos = ids[j]  # prompt 1 stops at its (j+1)-th token; the others where (if) they meet it
    cfg = dataclasses.replace(GREEDY, eos_token_ids=(eos,))
    refs = [sampler.generate([p], cfg) for p in PROMPTS]
    engine.reset_stats()
    out = engine.generate(PROMPTS, cfg)  # 5 requests, 2 slots: slots are refilled as rows finish
    assert out.finish_reasons[1] == "eos" and out.lengths[1] == j + 1
    for i, ref in enumerate(refs):
        assert out.response_ids(i) == ref.response_ids(0), i
        assert out.finish_reasons[i] == ref.finish_reasons[0]
        np.testing.assert_allclose(out.logprobs[i], ref.logprobs[0], atol=ATOL, rtol=0)
        assert (out.tokens[i, out.lengths[i] :] == 0).all() and out.mask[i].sum() == out.lengths[i]
    s = engine.stats
    assert s["prefill_calls"] >= 3 and s["prefill_tokens"] == sum(map(len, PROMPTS))
    assert s["generated_tokens"] == out.lengths.sum() and 0.5 < s["occupancy"] <= 1.0
    assert s["free_pages"] == ENGINE.num_pages  # every page came back


def _run(engine, requests):
    ids = [engine.submit(r) for r in requests]
    engine.run_until_done()
    return [engine.results.pop(i) for i in ids]


@pytest.mark.slow  # ~18 s on 2 loaded cores: sampled programs compiled (tests/_tiers.py)
def test_prefix_sharing_equals_separate_prompts(engine, sampler):
    prompt = PROMPTS[1]
    keys = [jax.random.key(40 + j) for j in range(3)]
    for cfg in (GREEDY, SAMPLED):
        engine.reset_stats()
        shared = _run(engine, [models.Request(prompt, cfg, key=k) for k in keys])  # 3 samples, 2 slots
        assert engine.stats["prefill_tokens"] == len(prompt)  # one prefill; the others copy its pages
        assert engine.stats["prefill_saved_sharing"] == 2 * len(prompt)
        separate = [_run(engine, [models.Request(prompt, cfg, key=k)])[0] for k in keys]
        again = _run(engine, [models.Request(prompt, cfg, key=k) for k in keys])
        for a, b, c in zip(shared, separate, again):
            assert a.response_ids == b.response_ids == c.response_ids
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=ATOL, rtol=0)
            np.testing.assert_array_equal(a.logprobs, c.logprobs)  # deterministic for fixed keys
    assert len({tuple(r.response_ids) for r in shared}) == 3  # sampled: each sample has its own stream
    ref = sampler.generate([prompt], GREEDY)
    greedy_shared = _run(engine, [models.Request(prompt, GREEDY, seed=j) for j in range(3)])
    for r in greedy_shared:
        assert r.response_ids == ref.response_ids(0)
        np.testing.assert_allclose(r.logprobs, ref.logprobs[0], atol=ATOL, rtol=0)


@pytest.mark.slow  # ~17 s on 2 loaded cores alone: sampled programs compiled (tests/_tiers.py)
def test_continued_turns_equal_a_fresh_prefill_of_the_whole_context(engine):
    ctx, parent = PROMPTS[3], None
    for turn in range(3):
        key = jax.random.key(100 + turn)
        engine.reset_stats()
        req = models.Request(ctx, SAMPLED, key=key, parent=parent, keep_cache=True)
        cont = _run(engine, [req])[0]
        cached = 0 if parent is None else len(ctx) - 1 - 7  # all but the last token and the observation
        assert engine.stats["prefill_saved_continuation"] == cached
        assert engine.stats["prefill_tokens"] == len(ctx) - cached
        fresh = _run(engine, [models.Request(ctx, SAMPLED, key=key)])[0]
        assert cont.response_ids == fresh.response_ids, turn
        np.testing.assert_allclose(cont.logprobs, fresh.logprobs, atol=ATOL, rtol=0)
        ctx, parent = ctx + cont.response_ids + _ids(10 + turn, 7), cont.id
    assert engine.stats["kept_pages"] == -(-(len(ctx) - 7 - 1) // ENGINE.page_size)
    engine.release(parent)
    assert engine.stats["kept_pages"] == 0 and engine.stats["free_pages"] == ENGINE.num_pages


@pytest.mark.slow  # compiles the engine when run alone (tests/_tiers.py)
def test_continuation_errors(engine):
    first = _run(engine, [models.Request(PROMPTS[0], GREEDY, keep_cache=True)])[0]
    ctx = PROMPTS[0] + first.response_ids
    with pytest.raises(ValueError, match="no kept cache"):
        engine.submit(models.Request(ctx + [1], GREEDY, parent=first.id + 1000))
    bad = list(ctx)
    bad[2] = (bad[2] + 1) % 8000
    with pytest.raises(ValueError, match="does not extend its cached tokens .*token 2"):
        engine.submit(models.Request(bad, GREEDY, parent=first.id))
    with pytest.raises(ValueError, match="must add at least one token"):
        engine.submit(models.Request(ctx[:-1], GREEDY, parent=first.id))
    nxt = engine.submit(models.Request(ctx + [1], GREEDY, parent=first.id))
    with pytest.raises(ValueError, match="already being continued"):
        engine.submit(models.Request(ctx + [2], GREEDY, parent=first.id))
    with pytest.raises(ValueError, match="named by a waiting continuation"):
        engine.release(first.id)
    engine.run_until_done()
    assert engine.results.pop(nxt).response_ids
    with pytest.raises(ValueError, match="no kept cache"):
        engine.submit(models.Request(ctx + [1], GREEDY, parent=first.id))


@pytest.mark.slow  # ~20 s on 2 loaded cores: a second engine compiled (tests/_tiers.py)
def test_budget_makes_requests_wait_and_rejects_what_never_fits(model, sampler):
    # 10 prompt tokens + 7 new - 1 = 16 KV positions = 2 pages of 8: a 4-page budget holds two requests.
    cfg = models.EngineConfig(
        num_slots=3, page_size=8, kv_budget_tokens=32, max_seq_len=64, segment_steps=4, prefill_buckets=(32,)
    )
    engine = models.Engine(model, cfg)
    gen = dataclasses.replace(GREEDY, max_new_tokens=7)
    prompts = [_ids(50 + i, 10) for i in range(3)]
    ids = [engine.submit(models.Request(p, gen)) for p in prompts]
    engine.step()
    assert len(engine._running) == 2 and engine._waiting == [ids[2]]  # the third waits for pages
    engine.run_until_done()
    for i, p in zip(ids, prompts):
        ref = sampler.generate([p], gen)
        assert engine.results[i].response_ids == ref.response_ids(0)
    with pytest.raises(ValueError, match=r"needs 40 KV positions .* 4 pages of 8 in its kv_budget_tokens=32"):
        engine.submit(models.Request(_ids(60, 30), dataclasses.replace(GREEDY, max_new_tokens=11)))
    # Kept caches hold pages until released: a request that cannot start while nothing runs is an error.
    kept = [engine.submit(models.Request(p, gen, keep_cache=True)) for p in prompts[:2]]
    engine.run_until_done()
    engine.submit(models.Request(prompts[2], gen))
    with pytest.raises(models.PagesBlocked, match="held by kept caches"):
        engine.step()
    engine.release(kept[0])
    engine.run_until_done()
    assert engine.results[max(engine.results)].response_ids == engine.results[ids[2]].response_ids


# --- fast: the paged forward itself, and what submit() rejects before anything compiles -----------------


@functools.partial(jax.jit, static_argnums=0)
def _two_windows(graphdef, state, pool, tokens, table):
    """Tokens [1, 24] run as a prefill of 11, then a window of 13 against the pages (like a continued turn);
    returns the logits of every position."""
    model = nnx.merge(graphdef, state)
    outs = []
    for lo, hi in ((0, 11), (11, 24)):
        pos = jnp.arange(lo, lo + 16)[None]
        write = pos < hi
        toks = jnp.pad(tokens[:, lo:hi], ((0, 0), (0, 16 - (hi - lo))))
        hidden, pool = _paged.paged_forward(model, toks, pos, write, pool, table)
        outs.append(model.logits(hidden[:, : hi - lo]))
    return jnp.concatenate(outs, axis=1)


def test_paged_forward_equals_full_forward(model):
    graphdef, state = nnx.split(model)
    cfg = models.EngineConfig(page_size=4, kv_budget_tokens=64, max_seq_len=32)
    pool = _paged.empty_pool(model.config, cfg.num_pages, cfg.page_size)
    table = np.full((1, cfg.max_pages), cfg.num_pages, np.int32)
    table[0, :6] = [9, 2, 14, 0, 7, 11]  # scattered physical pages; the rest point at the trash page
    tokens = jnp.asarray([_ids(70, 24)], jnp.int32)
    got = np.asarray(_two_windows(graphdef, state, pool, tokens, jnp.asarray(table)))
    ref = np.asarray(model(tokens))
    np.testing.assert_allclose(got, ref, atol=ATOL, rtol=0)


def test_submit_rejects_what_can_never_run(model):
    engine = models.Engine(model, models.EngineConfig(num_slots=2, page_size=8, kv_budget_tokens=32))
    with pytest.raises(ValueError, match=r"needs 40 KV positions .* 4 pages of 8 in its kv_budget_tokens=32"):
        engine.submit(models.Request(_ids(60, 30), dataclasses.replace(GREEDY, max_new_tokens=11)))
    with pytest.raises(ValueError, match="no kept cache"):
        engine.submit(models.Request([5, 6], GREEDY, parent=0))
    with pytest.raises(ValueError, match="at least one prompt token"):
        engine.submit(models.Request([], GREEDY))
    with pytest.raises(ValueError, match="stop strings need"):
        engine.submit(models.Request([5], dataclasses.replace(GREEDY, stop_strings=("x",))))
    with pytest.raises(ValueError, match="kv_budget_tokens .* less than one page"):
        models.EngineConfig(page_size=16, kv_budget_tokens=8)
    assert not engine.busy and engine.stats["free_pages"] == 4


@pytest.mark.slow  # compiles the engine when run alone (tests/_tiers.py)
def test_stop_strings_equal_the_sampler(engine, sampler):
    tok = models.default_tokenizer()
    free = [sampler.generate([p], GREEDY) for p in PROMPTS[:3]]
    text = tok.decode(free[1].response_ids(0))
    start = len(tok.decode(free[1].response_ids(0)[:5]))
    stop = text[start : start + 3]  # completes in row 1's 6th..8th token (maybe across a token boundary)
    assert stop
    cfg = dataclasses.replace(GREEDY, stop_strings=(stop,), stop_check_interval=3)
    sampler.tokenizer, engine.tokenizer = tok, tok
    try:
        refs = [sampler.generate([p], cfg) for p in PROMPTS[:3]]
        out = engine.generate(PROMPTS[:3], cfg)
    finally:
        sampler.tokenizer, engine.tokenizer = None, None
    assert refs[1].finish_reasons[0] == "stop" and refs[1].lengths[0] <= 8
    for i, ref in enumerate(refs):
        assert out.response_ids(i) == ref.response_ids(0), i
        assert out.finish_reasons[i] == ref.finish_reasons[0]
        np.testing.assert_allclose(out.logprobs[i], ref.logprobs[0], atol=ATOL, rtol=0)


@pytest.mark.slow  # compiles the engine when run alone (tests/_tiers.py)
def test_greedy_and_sampled_requests_share_segments(engine, sampler):
    """Greedy rows decoded beside sampled ones (one program picking per row) give the Sampler's greedy
    output; sampled rows give what they give alone."""
    keys = [jax.random.key(7), jax.random.key(8)]
    reqs = [
        models.Request(PROMPTS[0], GREEDY),
        models.Request(PROMPTS[2], SAMPLED, key=keys[0]),
        models.Request(PROMPTS[4], GREEDY),
        models.Request(PROMPTS[3], SAMPLED, key=keys[1]),
    ]
    mixed = _run(engine, reqs)
    for r, req in zip(mixed, reqs):
        if req.config is GREEDY:
            ref = sampler.generate([req.prompt], GREEDY)
            assert r.response_ids == ref.response_ids(0)
            np.testing.assert_allclose(r.logprobs, ref.logprobs[0], atol=ATOL, rtol=0)
        else:
            alone = _run(engine, [models.Request(req.prompt, SAMPLED, key=req.key)])[0]
            assert r.response_ids == alone.response_ids
            np.testing.assert_allclose(r.logprobs, alone.logprobs, atol=ATOL, rtol=0)


def test_cancel_drops_only_a_waiting_request(model):
    """``cancel`` (the agent's engine driver drops requests that can never start) takes a request out of
    the queue before admission; anything else is a ValueError."""
    engine = models.Engine(model, ENGINE)
    first = engine.submit(models.Request(PROMPTS[0], GREEDY))
    second = engine.submit(models.Request(PROMPTS[1], GREEDY))
    engine.cancel(first)
    assert engine.busy and engine._waiting == [second] and first not in engine._requests
    with pytest.raises(ValueError, match="is not waiting"):
        engine.cancel(first)
    engine.cancel(second)
    assert not engine.busy and engine.stats["free_pages"] == ENGINE.num_pages
