"""Verdict -> reward (the sandbox's registry through kernels_env.client), dropped episodes counted, reward
placement (final / per-turn discounted), and packing of verl-style records into an aligned RLBatch."""

from __future__ import annotations

import numpy as np
import pytest

from kernels_env.client import INFRA_ERROR, NO_SOLUTION, NO_VERDICT, REWARDS, Result
from research import rl


def verdict(status, reward=None, eager=None, compile_=None):
    return {"status": status, "reward": reward, "speedups": {"eager": eager, "compile": compile_}}


def test_verdict_reward_from_the_verdict_and_from_the_registry():
    cfg = rl.RewardConfig()
    assert rl.verdict_reward(verdict("correct", 2.0), cfg) == 2.0
    tiers = rl.RewardConfig(reward_fn="cuda_agent")
    assert rl.verdict_reward(verdict("correct", None, 1.2, 1.1), tiers) == 3.0
    assert rl.verdict_reward(verdict("correct", None, 1.2, 0.9), tiers) == 2.0
    assert rl.verdict_reward(verdict("correct", None, 1.01, 0.5), tiers) == 1.0
    assert rl.verdict_reward(verdict("timeout", None), tiers) == -1.0  # a hung candidate is the policy's
    raw = rl.RewardConfig(reward_fn="speedup")
    assert rl.verdict_reward(verdict("correct", None, 1.7, 1.0), raw) == pytest.approx(1.7)


@pytest.mark.parametrize("status", rl.NON_POLICY_STATUSES)
def test_non_policy_verdicts_are_dropped(status):
    with pytest.raises(rl.Dropped) as exc:
        rl.verdict_reward(verdict(status, 3.0), rl.RewardConfig(reward_fn="cuda_agent"))
    assert exc.value.reason == status


def test_the_drop_statuses_are_the_clients_no_verdict_vocabulary_but_toolchain_missing():
    assert rl.NON_POLICY_STATUSES == rl.RewardConfig().drop_statuses
    assert set(rl.NON_POLICY_STATUSES) == set(NO_VERDICT) - {"toolchain_missing"}
    assert INFRA_ERROR in rl.NON_POLICY_STATUSES and NO_SOLUTION not in rl.NON_POLICY_STATUSES


@pytest.mark.parametrize(
    ("reward_fn", "failure"), [("cuda_agent", -1.0), ("binary", 0.0), ("log_speedup", -2.0)]
)
def test_toolchain_missing_is_no_way_out_of_a_negative_reward(reward_fn, failure):
    """A policy that writes a backend the training machine lacks gets the failure reward, not a drop."""
    v = {"status": "toolchain_missing", "reward": None, "reward_fn": reward_fn, "speedups": {}}
    assert rl.verdict_reward(v, rl.RewardConfig()) == failure  # the verdict's reward function
    assert rl.verdict_reward(v, rl.RewardConfig(reward_fn="cuda_agent")) == -1.0  # the run's, when set
    with pytest.raises(rl.Dropped, match="no_reward"):
        rl.verdict_reward({**v, "reward_fn": None}, rl.RewardConfig())  # no function to ask: dropped


@pytest.mark.parametrize("reward_fn", [None, *REWARDS])
def test_outside_verdicts_infra_error_dropped_no_solution_the_failure_reward(reward_fn):
    """The verdicts the agent loop makes (``Result.outside``) through ``verdict_reward``: a sandbox that was
    not reached is dropped under every reward; no solution gets the reward's failure value, that of a
    candidate that compiled and was wrong."""
    cfg = rl.RewardConfig(reward_fn=reward_fn)
    judged = reward_fn or "cuda_agent"  # reward_fn None: the reward the verdict carries (its judge's)
    infra = Result.outside(INFRA_ERROR, "the sandbox did not answer", problem="p", reward_fn=judged)
    with pytest.raises(rl.Dropped, match=f"^{INFRA_ERROR}$"):
        rl.verdict_reward(infra.to_dict(), cfg)
    none = Result.outside(NO_SOLUTION, "no model_new.py", problem="p", reward_fn=judged).to_dict()
    wrong = verdict("incorrect", none["reward"], 9.0, 9.0)  # fast speedups: a failure never counts them
    failure = {"cuda_agent": -1.0, "binary": 0.0, "speedup": 0.0, "log_speedup": -2.0}[judged]  # docs table
    as_wrong = rl.verdict_reward(wrong, rl.RewardConfig(reward_fn=judged))
    assert rl.verdict_reward(none, cfg) == as_wrong == failure


def test_not_run_has_no_reward_and_is_dropped():
    with pytest.raises(rl.Dropped, match="^not_run$"):
        rl.verdict_reward(verdict("not_run", None), rl.RewardConfig())


def record(prompt, resp, mask, **kw):
    return {
        "prompt_ids": prompt,
        "response_ids": resp,
        "response_mask": mask,
        "logprobs": [-0.5 if m else 0.0 for m in mask],
        **kw,
    }


def test_pack_aligns_tokens_masks_rewards_and_counts_drops():
    recs = [
        record([5, 6], [7, 8, 9, 10, 11], [1, 1, 0, 0, 1], verdict=verdict("correct", 3.0), group="a"),
        record([5], [7, 8], [1, 1], verdict=verdict("judge_error", None), group="a"),
        record([5], [7, 8], [1, 1], verdict=verdict("reference_error", None)),
        record([5, 6, 7], [8, 9], [1, 1], reward=-1.0, group="a"),
        record([5], [7, 8], [0, 0], reward=1.0),
        record([5], [7] * 30, [1] * 30, reward=1.0),
    ]
    batch, drops, kept = rl.pack_trajectories(
        recs, rl.RewardConfig(), rl.PackConfig(max_len=16, pad_to=8, rows_multiple=4)
    )
    assert kept == [0, 3]
    assert dict(drops) == {"judge_error": 1, "reference_error": 1, "no_policy_token": 1, "too_long": 1}
    assert drops.as_metrics()["dropped/total"] == 4
    assert batch.tokens.shape == (4, 8)
    np.testing.assert_array_equal(batch.tokens[0], [5, 6, 7, 8, 9, 10, 11, 0])
    np.testing.assert_array_equal(batch.response_mask[0], [0, 0, 1, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(batch.turn_ids[0], [-1, -1, 0, 0, -1, -1, 1, -1])
    np.testing.assert_array_equal(batch.token_rewards[0], [0, 0, 0, 0, 0, 0, 3, 0])  # final token
    np.testing.assert_array_equal(batch.old_logprobs[0], [0, 0, -0.5, -0.5, 0, 0, -0.5, 0])
    np.testing.assert_array_equal(batch.token_rewards[1], [0, 0, 0, 0, -1, 0, 0, 0])
    assert batch.group_ids[0] == batch.group_ids[1]
    assert len(set(batch.group_ids.tolist())) == 3  # padding rows: groups of their own
    assert batch.response_mask[2:].sum() == 0
    assert batch.group_ids.max() < 4


def test_per_turn_rewards_with_turn_discount():
    rec = record(
        [1],
        [2, 3, 4, 5, 6, 7],
        [1, 1, 0, 1, 0, 1],
        turn_verdicts=[verdict("incorrect", -1.0), None, verdict("correct", 2.0)],
    )
    cfg = rl.RewardConfig(placement="per_turn", turn_gamma=0.4)
    batch, drops, _ = rl.pack_trajectories([rec], cfg, rl.PackConfig(pad_to=1))
    np.testing.assert_array_equal(batch.token_rewards[0], [0, 0, -1, 0, 0, 0, 2])
    np.testing.assert_allclose(batch.token_discounts[0], [1, 1, 0.4, 1, 0.4, 1, 0.4])
    # returns from each turn's first token: turn 2: 2; turn 1: 0.4 * 2; turn 0: -1 + 0.4 * 0.8
    rtg = np.asarray(rl.returns_to_go(batch.token_rewards, batch.response_mask, batch.token_discounts))
    np.testing.assert_allclose(rtg[0, [1, 4, 6]], [-1 + 0.4 * 0.8, 0.8, 2.0], rtol=1e-6)
    bad = dict(rec, turn_verdicts=[verdict("correct", 1.0), verdict(INFRA_ERROR), None])
    _, drops, kept = rl.pack_trajectories([bad], cfg)
    assert kept == [] and drops[INFRA_ERROR] == 1


def test_turn_spans_and_bad_records():
    assert rl.turn_spans([0, 1, 1, 0, 1, 0, 0, 1]) == [(1, 3), (4, 5), (7, 8)]
    with pytest.raises(ValueError, match="one entry per response token"):
        rl.pack_trajectories([record([1], [2, 3], [1])], rl.RewardConfig())
    with pytest.raises(ValueError, match="empty prompt"):
        rl.pack_trajectories([record([], [2], [1], reward=1.0)], rl.RewardConfig())
    with pytest.raises(ValueError, match="turn_verdicts"):
        rl.pack_trajectories([record([1], [2], [1])], rl.RewardConfig(placement="per_turn"))
