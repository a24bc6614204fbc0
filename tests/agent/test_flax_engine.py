"""The Flax policy over ``models.Engine`` (``generation.backend=engine``), in-process (a fake workspace, no
sandbox): greedy episodes give the sampler path's trajectories (ids, mask; log-probs to 2e-5), sampled
episodes are the same run after run and whatever the engine's slot count, every page is free once the
episodes end, and an engine that cannot hold one context is a one-line config error."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import models
from research.agent import AgentConfigError, Budgets, GenerationConfig, PolicyConfig, make_policy, run_episode
from research.agent.policies.chat import TINY_TEMPLATE
from research.agent.policies.engine_driver import EngineDriver
from research.agent.policies.flax_policy import FlaxPolicy

from .conftest import FAST
from .test_episode import FakeWorkspace

SMALL = dict(num_layers=2, hidden_size=64, head_dim=16, intermediate_size=128, compute_dtype="float32")
ATOL = 2e-5  # the engine's own greedy parity with the Sampler (tests/models/test_engine.py)
TURNS = 3
# two episodes of one task (a group: same prompt) and one of another
EPISODES = [("level1/1_relu", "ref A", 0), ("level1/1_relu", "ref A", 1), ("level1/2_gelu", "ref B", 2)]


@pytest.fixture(scope="module")
def model():
    return models.init_model(models.tiny_config(**SMALL), seed=1)


def _policy(model, generation=None, temperature=0.0, seed=3):
    return FlaxPolicy(
        model,
        models.default_tokenizer(),
        template=TINY_TEMPLATE,
        temperature=temperature,
        max_tokens=10,
        batch_buckets=(4,),
        lockstep=True,  # the sampler path's rows in episode order (the RL setting)
        seed=seed,
        generation=generation,
        max_context=2048,
    )


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
    return out


def _engine(n_slots=2, budget=8192):
    return GenerationConfig(backend="engine", num_slots=n_slots, page_size=16, kv_budget_tokens=budget)


def _assert_free(policy):
    stats = policy.engine.stats
    assert stats["kept_pages"] == 0 and stats["free_pages"] == policy.engine.config.num_pages
    assert not policy.engine.busy and not policy.engine.results


def test_greedy_engine_episodes_equal_the_sampler_path(model):
    ref = _play(_policy(model))
    eng_policy = _policy(model, _engine())
    got = _play(eng_policy)
    for r, g in zip(ref, got):
        assert len(r["turns"]) == TURNS and g["end_reason"] == r["end_reason"] == "max_turns"
        for k in ("prompt_ids", "response_ids", "response_mask", "turn_ids"):
            assert g[k] == r[k], k
        np.testing.assert_allclose(g["logprobs"], r["logprobs"], atol=ATOL, rtol=0)
    assert ref[0]["prompt_ids"] == ref[1]["prompt_ids"] != ref[2]["prompt_ids"]
    _assert_free(eng_policy)
    stats = eng_policy.engine.stats
    # a later turn prefills only the last sampled token (never fed back) and its observation: the rest of
    # the context stayed in the engine's pages
    later = sum(len(t["prompt_ids"]) + t["turns"][k]["end"] - 1 for t in got for k in range(TURNS - 1))
    assert stats["prefill_saved_continuation"] == later
    assert eng_policy.describe()["generation"] == "engine"


def test_sampled_engine_episodes_are_reproducible_across_runs_and_slot_counts(model):
    runs = [_play(_policy(model, _engine(n), temperature=1.0)) for n in (2, 2, 1, 4)]
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert a["response_ids"] == b["response_ids"] and a["response_mask"] == b["response_mask"]
            np.testing.assert_allclose(a["logprobs"], b["logprobs"], atol=ATOL, rtol=0)
    assert runs[0][0]["response_ids"] != runs[0][1]["response_ids"]  # one prompt, two episode streams
    other_seed = _play(_policy(model, _engine(), temperature=1.0, seed=4))
    assert other_seed[0]["response_ids"] != runs[0][0]["response_ids"]


def test_an_engine_that_cannot_hold_one_context_is_a_one_line_config_error(model):
    cfg = PolicyConfig(name="flax", max_tokens=64, generation=_engine(budget=256))
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
    _assert_free(policy)


def test_a_driver_refuses_an_engine_still_holding_requests(model):
    engine = models.Engine(model, _engine().engine_config(256))
    engine.submit(models.Request([1, 2, 3], models.SamplingConfig(max_new_tokens=2)))
    with pytest.raises(RuntimeError, match="in use"):
        EngineDriver(engine, models.SamplingConfig(), keep_cache=True)
