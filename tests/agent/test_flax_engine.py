"""The Flax policy over ``models.Engine`` (``generation.backend=engine``), in-process (a fake workspace, no
sandbox): greedy episodes give the sampler path's trajectories (ids, mask; log-probs to 2e-5), sampled
episodes are the same run after run and whatever the engine's slot count, every page is free once the
episodes end, and an engine that cannot hold one context is a one-line config error."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import models
from research.agent import (
    AgentConfigError,
    Budgets,
    FlaxPolicyConfig,
    GenerationConfig,
    make_policy,
    run_episode,
)
from research.agent.policies.chat import TINY_TEMPLATE
from research.agent.policies.engine_driver import EngineDriver
from research.agent.policies.flax_policy import FlaxPolicy

from .conftest import FAST
from .test_episode import FakeWorkspace

# the larger init of tests/models/test_engine.py: the default tiny random model greedily repeats a token
SMALL = dict(
    num_layers=2,
    hidden_size=64,
    head_dim=16,
    intermediate_size=128,
    compute_dtype="float32",
    initializer_range=0.3,
)
ATOL = 2e-5  # the engine's own greedy parity with the Sampler (tests/models/test_engine.py)
TURNS = 3
# two episodes of one task (a group: same prompt) and one of another
EPISODES = [("level1/1_relu", "ref A", 0), ("level1/1_relu", "ref A", 1), ("level1/2_gelu", "ref B", 2)]


@pytest.fixture(scope="module")
def model():
    return models.init_model(models.tiny_config(**SMALL), seed=1)


@pytest.fixture(scope="module")
def engines():
    """Engines by slot count, shared by the tests of this module (each compiles once)."""
    return {}


def _policy(model, generation=None, temperature=0.0, seed=3, sampler=None):
    return FlaxPolicy(
        model,
        models.default_tokenizer(),
        template=TINY_TEMPLATE,
        temperature=temperature,
        max_tokens=10,
        batch_buckets=(4,),
        lockstep=True,  # the sampler path's rows in episode order (the RL setting)
        max_wait_s=10.0,  # the engine's first turns start together (all episodes ask at once)
        seed=seed,
        generation=generation,
        max_context=2048,
        sampler=sampler,
    )


def _engine_policy(model, engines, n_slots, temperature=0.0, seed=3):
    if n_slots in engines:  # the RL runtime's way: one engine, a policy per rollout batch
        return _policy(None, temperature=temperature, seed=seed, sampler=engines[n_slots])
    policy = _policy(model, _engine(n_slots), temperature=temperature, seed=seed)
    engines[n_slots] = policy.engine
    return policy


class _Seat:
    """The policy as episode ``key`` sees it (what ``research.rl.pipeline.agent_env`` hands the loop)."""

    def __init__(self, policy, key):
        self.policy, self.key = policy, key

    def start(self, task_id, messages, tools):
        return self.policy.start(task_id, messages, tools, key=self.key)


def _play(policy, episodes=EPISODES):
    """Every episode at once in its own thread; the trajectories as dicts, in episode order."""
    out = [None] * len(episodes)

    def one(i):
        task, ref, key = episodes[i]
        res = run_episode(task, ref, _Seat(policy, key), FakeWorkspace(), Budgets(max_turns=TURNS), FAST)
        out[i] = res.trajectory.to_dict()

    policy.batcher.reserve(len(episodes))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(episodes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    policy.close()
    if policy.engine is not None:  # every page free once the episodes ended
        stats = policy.engine.stats
        assert stats["kept_pages"] == 0 and stats["free_pages"] == policy.engine.config.num_pages
        assert not policy.engine.busy and not policy.engine.results
    return out


def _engine(n_slots=2, budget=8192):
    return GenerationConfig(backend="engine", num_slots=n_slots, page_size=16, kv_budget_tokens=budget)


@pytest.mark.slow  # ~11 s on 2 idle cores: the sampler and the engine compiled (tests/_tiers.py)
def test_greedy_engine_episodes_equal_the_sampler_path(model, engines):
    ref = _play(_policy(model))
    policy = _engine_policy(model, engines, 2)
    before = policy.engine.stats
    got = _play(policy)
    for r, g in zip(ref, got):
        assert len(r["turns"]) == TURNS and g["end_reason"] == r["end_reason"] == "max_turns"
        for k in ("prompt_ids", "response_ids", "response_mask", "turn_ids"):
            assert g[k] == r[k], k
        np.testing.assert_allclose(g["logprobs"], r["logprobs"], atol=ATOL, rtol=0)
    assert ref[0]["prompt_ids"] == ref[1]["prompt_ids"] != ref[2]["prompt_ids"]
    saved = policy.engine.stats["prefill_saved_continuation"] - before["prefill_saved_continuation"]
    # a later turn prefills only the last sampled token (never fed back) and its observation: the rest of
    # the context stayed in the engine's pages
    assert saved == sum(
        len(t["prompt_ids"]) + t["turns"][k]["end"] - 1 for t in got for k in range(TURNS - 1)
    )
    # the two episodes of one task prefilled their common prompt once
    shared = policy.engine.stats["prefill_saved_sharing"] - before["prefill_saved_sharing"]
    assert shared == len(got[0]["prompt_ids"])
    assert policy.describe()["generation"] == "engine"


@pytest.mark.slow  # ~13 s alone on 2 idle cores: two engines compiled (tests/_tiers.py)
def test_sampled_engine_episodes_are_reproducible_across_runs_and_slot_counts(model, engines):
    runs = [_play(_engine_policy(model, engines, n, temperature=1.0)) for n in (2, 2, 1)]
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert a["response_ids"] == b["response_ids"] and a["response_mask"] == b["response_mask"]
            np.testing.assert_allclose(a["logprobs"], b["logprobs"], atol=ATOL, rtol=0)
    assert runs[0][0]["response_ids"] != runs[0][1]["response_ids"]  # one prompt, two episode streams
    other_seed = _play(_engine_policy(model, engines, 2, temperature=1.0, seed=4))
    assert other_seed[0]["response_ids"] != runs[0][0]["response_ids"]


@pytest.mark.slow  # ~14 s alone: the engine and a full forward per length compiled (tests/_tiers.py)
def test_weights_swapped_into_the_engine_play_without_recompiling(model, engines):
    """What ``Runtime.sampler`` does before each RL batch: ``set_model`` with new weights of the same
    shapes; the episodes' log-probs are the new weights' (a recomputing forward pass), nothing recompiles."""
    policy = _engine_policy(model, engines, 2)
    engine = policy.engine
    _play(policy)
    compiled = (engine._prefill._cache_size(), engine._decode._cache_size(), engine._first._cache_size())
    new = models.init_model(models.tiny_config(**SMALL), seed=2)
    engine.set_model(new)
    try:
        got = _play(_engine_policy(model, engines, 2))
    finally:
        engine.set_model(model)
    assert (
        engine._prefill._cache_size(),
        engine._decode._cache_size(),
        engine._first._cache_size(),
    ) == compiled
    for t in got[1:]:
        ids = jnp.asarray([t["prompt_ids"] + t["response_ids"]])
        ref = np.asarray(models.token_logprobs(new, ids))[0, len(t["prompt_ids"]) - 1 :]
        on = np.asarray(t["response_mask"], bool)
        np.testing.assert_allclose(np.asarray(t["logprobs"])[on], ref[on], atol=ATOL, rtol=0)


class _FakeEngine:
    """The ``models.Engine`` surface the driver uses, host-only: each request finishes in the next step
    with two tokens; submits, releases and keys are recorded."""

    def __init__(self):
        self.submitted, self.released, self.results, self._running = [], [], {}, []
        self.busy = False

    @property
    def stats(self):
        return dict(kept_pages=0, prefill_tokens=0, prefill_saved_sharing=0, prefill_saved_continuation=0)

    def submit(self, req):
        self.submitted.append(req)
        self._running.append(len(self.submitted) - 1)
        return len(self.submitted) - 1

    def step(self):
        done, self._running = self._running, []
        return [
            models.Result(rid, self.submitted[rid].prompt, [5, 6], np.zeros(2, np.float32), "eos")
            for rid in done
        ]

    def release(self, rid):
        self.released.append(rid)


@pytest.mark.parametrize("keep_cache", [True, False])
def test_the_driver_continues_each_episode_with_its_own_turn_keys(keep_cache):
    engine = _FakeEngine()
    driver = EngineDriver(engine, models.SamplingConfig(max_new_tokens=2), keep_cache=keep_cache, seed=5)
    driver.register()
    ids, lps, finish, first = driver.generate([1, 2], None, key=7)
    assert (ids, finish) == ([5, 6], "eos") and lps == [0.0, 0.0]
    second = driver.generate([1, 2, 5, 6, 9], first, key=7)[3]
    driver.unregister(second)
    driver.close()
    reqs = engine.submitted
    assert [r.parent for r in reqs] == [None, first if keep_cache else None]
    assert all(r.keep_cache == keep_cache for r in reqs)
    base = jax.random.fold_in(jax.random.key(5), 7)
    for j, r in enumerate(reqs):  # turn j of episode 7: fold_in(fold_in(key(seed), 7), j)
        want = jax.random.key_data(jax.random.fold_in(base, j))
        np.testing.assert_array_equal(jax.random.key_data(r.key), want)
    assert engine.released == [second] and not engine.results
    assert [c["generated_tokens"] for c in driver.calls] == [2, 2]


class _FullEngine(_FakeEngine):
    """An engine whose KV pool is full of kept caches: no waiting request can start."""

    def __init__(self):
        super().__init__()
        self.cancelled = []

    def step(self):
        raise models.PagesBlocked("request 0 cannot start: 0 free pages, 64 held by kept caches")

    def cancel(self, rid):
        self.cancelled.append(rid)


def test_the_driver_waits_for_pages_while_an_episode_may_free_them_then_fails_clearly():
    engine = _FullEngine()
    driver = EngineDriver(engine, models.SamplingConfig(), keep_cache=True)
    driver.reserve(2)
    driver.register()
    driver.register()
    errors = []

    def ask():
        try:
            driver.generate([1, 2], None, key=0)
        except RuntimeError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=ask)
    t.start()
    t.join(0.5)
    assert t.is_alive() and not errors  # the other episode is in its tools: it may end and free pages
    driver.unregister(3)  # it ended without freeing enough: every live episode now waits
    t.join(10)
    assert not t.is_alive() and len(errors) == 1 and "raise generation.kv_budget_tokens" in errors[0]
    assert engine.cancelled == [0] and engine.released == [3]  # the stuck request left the engine's queue
    with pytest.raises(RuntimeError, match="kv_budget_tokens"):
        driver.generate([1], None, key=1)  # a broken driver answers at once
    driver.close()


def test_an_engine_that_cannot_hold_one_context_is_a_one_line_config_error(model):
    cfg = FlaxPolicyConfig(max_tokens=64, generation=_engine(budget=256))
    with pytest.raises(AgentConfigError) as err:
        make_policy(cfg, max_context=1024)
    msg = str(err.value)
    assert "\n" not in msg and "policy.generation.kv_budget_tokens=256" in msg and "1088 tokens" in msg
    with pytest.raises(AgentConfigError, match="generation.backend must be one of"):
        GenerationConfig(backend="vllm")
    with pytest.raises(AgentConfigError, match="generation.num_slots must be >= 1"):
        GenerationConfig(num_slots=0)


def test_a_context_over_the_engine_ends_the_episode_with_a_policy_error(model):
    """A context that outgrows the engine's per-request limit is that episode's error; others go on."""
    policy = _policy(model, GenerationConfig(backend="engine", num_slots=2, kv_budget_tokens=4096))
    engine = policy.engine
    engine.config = engine.config.__class__(**{**engine.config.__dict__, "max_seq_len": 16})
    ep = policy.start("t", [{"role": "user", "content": "hello " * 20}], [])
    action = ep.act([])
    assert action.finish_reason == "error" and "KV positions" in action.error
    ep.close()
    policy.close()
    assert policy.engine.stats["free_pages"] == policy.engine.config.num_pages


def test_a_driver_refuses_an_engine_still_holding_requests(model):
    engine = models.Engine(model, _engine().engine_config(256))
    engine.submit(models.Request([1, 2, 3], models.SamplingConfig(max_new_tokens=2)))
    with pytest.raises(RuntimeError, match="in use"):
        EngineDriver(engine, models.SamplingConfig(), keep_cache=True)


def test_the_rl_agent_env_builds_an_engine_for_its_rollout_shape(model):
    """``env=agent agent.generation.backend=engine``: ``make_sampler`` (what ``Runtime.sampler`` calls, then
    ``set_model`` before every batch) builds an engine for the rollout's longest context, and the rollout's
    policy plays over it through the engine driver."""
    from kernels_env.client import JudgeConfig
    from research.rl.pipeline.agent_env import AgentEnv, AgentEnvConfig
    from research.rollout import RolloutConfig

    tok = models.default_tokenizer()
    rollout = RolloutConfig(episodes=2, group_size=2, max_context=256, max_turn_tokens=32)
    env = AgentEnv({}, None, JudgeConfig(), tok, TINY_TEMPLATE, AgentEnvConfig(generation=_engine(3)))
    engine = env.make_sampler(model, rollout)
    assert isinstance(engine, models.Engine)
    assert (engine.config.max_seq_len, engine.config.num_slots, engine.config.num_pages) == (288, 3, 512)
    policy = FlaxPolicy(None, tok, template=TINY_TEMPLATE, sampler=engine, lockstep=True)
    assert isinstance(policy.batcher, EngineDriver) and policy.engine is engine
    policy.close()
    plain = AgentEnv({}, None, JudgeConfig(), tok, TINY_TEMPLATE, AgentEnvConfig())
    assert isinstance(plain.make_sampler(model, rollout), models.Sampler)  # the default: unchanged
    small = AgentEnv(
        {}, None, JudgeConfig(), tok, TINY_TEMPLATE, AgentEnvConfig(generation=_engine(budget=64))
    )
    with pytest.raises(AgentConfigError, match=r"^agent\.generation\.kv_budget_tokens=64 "):
        small.make_sampler(model, rollout)


class _BrokenEngine(_FakeEngine):
    """An engine whose step fails for another reason (a device error): never mistaken for waiting pages."""

    def step(self):
        raise RuntimeError("RESOURCE_EXHAUSTED: out of memory while trying to allocate 9.00GiB")

    def cancel(self, rid):
        pass


def test_a_failing_engine_step_is_reported_as_itself_at_once():
    driver = EngineDriver(_BrokenEngine(), models.SamplingConfig(), keep_cache=True)
    driver.reserve(2)
    driver.register()
    driver.register()  # the other episode is in its tools: a page wait would be retried, this is not
    with pytest.raises(RuntimeError, match="RESOURCE_EXHAUSTED") as info:
        driver.generate([1, 2], None, key=0)
    assert "kv_budget_tokens" not in str(info.value)
    driver.close()


def test_the_driver_submits_a_prompts_episodes_together_whatever_order_they_ask_in():
    from research.agent.policies.engine_driver import _siblings_together, _Turn

    a0, b, a1, c = _Turn([1, 2], None, 0), _Turn([3], None, 1), _Turn([1, 2], None, 2), _Turn([9], 7, 3)
    a2 = _Turn([1, 2], None, 4)
    assert _siblings_together([a0, b, c, a1, a2]) == [a0, a1, a2, b, c]
    assert _siblings_together([c, b, a0]) == [c, b, a0]
    assert _siblings_together([b, a0, c, a1]) == [a0, a1, b, c]  # the group first, whatever asked first
