"""The consumers of ``research.rollout.Trajectory`` (issue 30): the toy environment's trajectories (end
reasons, dropped verdicts, per-turn rewards), the RFT filters on tool calls (malformed, hallucinated),
rollout metrics of tool calls and end reasons, and packing a Trajectory, its dict and its JSONL line alike."""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_fixtures import SMALL_TASKS, RuleJudge, ScriptedSampler

from kernels_env.client import NO_VERDICT
from research import rl
from research.rl import pipeline as pl
from research.rollout import CallRecord, Sampling, Trajectory, TrajectoryBuilder, read_trajectories
from research.rollout import write_trajectories as write
from research.toyenv import Judgement, baseline_plan, make_tasks

REWARD = rl.RewardConfig()
PER_TURN = rl.RewardConfig(placement="per_turn", turn_gamma=0.5)


@pytest.fixture(scope="module")
def task():
    return make_tasks(SMALL_TASKS).split("train")[0]


def test_the_learner_drops_the_sandbox_s_no_verdict_statuses():
    # one vocabulary: what the toy environment records for a verdict that is not the policy's doing
    assert (
        set(rl.NON_POLICY_STATUSES) == set(NO_VERDICT) - {"toolchain_missing"} and "infra_error" in NO_VERDICT
    )


class DropSecond(RuleJudge):
    """RuleJudge, but the second plan of each call times out (not the policy's doing here)."""

    def judge_many(self, items, use_cache=True):
        out = super().judge_many(items, use_cache)
        if len(out) > 1:
            out[1] = Judgement("timeout", None, error="worker timed out", dropped=True)
        return out


def test_toy_end_reasons_dropped_verdicts_and_per_turn_rewards(task):
    """Three two-turn episodes: one runs both turns, one's verdict is dropped (the episode ends there and
    packing drops it), one outgrows the context bucket after its first observation."""
    tok = pl.toy_tokenizer()
    plan = tok.encode_plan(baseline_plan(task))
    p = len(tok.encode_prompt(task))
    junk = [tok.encode(["K"])[0]] * (len(plan) + 1) + [tok.eos_id]  # no plan, longer than the plan
    script = [[plan, plan, junk], [plan]]
    # the bucket holds a first plan and its observation, not the junk's
    cfg = pl.RolloutConfig(
        turns=2, episodes=3, group_size=1, max_turn_tokens=64, max_context=p + len(plan) + 5
    )
    env = pl.ToyEnv({"train": [task]}, DropSecond())
    recs = env.rollout(ScriptedSampler(script, tok.eos_id), cfg, 0, tasks=[task] * 3, groups=[0, 1, 2])
    full, dropped, overflow = recs
    assert [r.end_reason for r in recs] == ["max_turns", "non_policy_verdict", "context_budget"]
    assert dropped.verdict["status"] == "infra_error" and dropped.verdict["reward"] is None
    assert dropped.turns[0].verdict == {**dropped.verdict} and len(dropped.turns) == 1
    assert overflow.turns[0].invalid and overflow.turns[0].verdict["status"] == "invalid_plan"
    assert len(overflow.turns) == 1 and overflow.response_mask[-1] == 1  # the observation was trimmed
    assert [t.verdict["reward"] for t in full.turns] == [1.0, 1.0]  # correct but slower than eager
    batch, drops, kept = rl.pack_trajectories(recs, PER_TURN, rl.PackConfig(max_len=cfg.max_len, pad_to=8))
    assert kept == [0, 2] and dict(drops) == {"infra_error": 1}
    # per_turn placement: each turn's own verdict reward on its last policy token, gamma there
    last = [p + t.end - 1 for t in full.turns]
    np.testing.assert_array_equal(np.flatnonzero(batch.token_rewards[0]), last)
    np.testing.assert_array_equal(batch.token_rewards[0, last], [1.0, 1.0])
    np.testing.assert_array_equal(batch.token_discounts[0, last], [0.5, 0.5])
    m = pl.rollout_metrics(recs, REWARD)
    assert m["end/max_turns"] == m["end/context_budget"] == m["end/non_policy_verdict"] == 1.0
    assert m["dropped/infra_error"] == 1.0 and m["episodes"] == 2.0


def _agent_trajectory(calls_per_turn, reward=1.0, group=None) -> Trajectory:
    """An agent-loop-like episode: one policy turn per entry, its tool calls, a tool observation between."""
    b = TrajectoryBuilder([1, 2, 3], task_id="level1/1", group=group, sampling=Sampling(temperature=0.7))
    for k, calls in enumerate(calls_per_turn):
        turn = b.policy([10 + k, 11 + k, 2], [-0.1, -0.2, -0.3], finish="tool_calls")
        turn.calls += calls
        if calls and calls[0].verdict is not None:
            turn.verdict = calls[0].verdict
        b.observe([50, 51])
    verdict = {"status": "correct", "reward": reward, "speedups": {"eager": 1.2}}
    return b.build(verdict, end_reason="submitted")


def test_filters_reject_malformed_and_hallucinated_tool_calls():
    ok = CallRecord("write_file", ok=True)
    bad = CallRecord("write_file", valid=False, error="arguments are not JSON")
    unknown = CallRecord("run_shell", known=False, error="no such tool")
    good = _agent_trajectory([[ok], [CallRecord("submit", ok=True)]])
    malformed = _agent_trajectory([[ok], [bad]])
    hallucinated = _agent_trajectory([[unknown], [ok]])
    kept, drops = pl.rft_filter([good, malformed, hallucinated], pl.RFTFilterConfig(), REWARD)
    assert kept == [good] and dict(drops) == {"invalid_action": 1, "hallucinated_action": 1}
    assert pl.has_invalid_action(malformed) and not pl.has_hallucination(malformed)
    assert pl.has_hallucination(hallucinated) and not pl.has_invalid_action(hallucinated)
    # the same from the trajectories' dicts (JSONL lines)
    assert [
        pl.rejection_reason(t.to_dict(), pl.RFTFilterConfig(), REWARD) for t in (malformed, hallucinated)
    ] == [
        "invalid_action",
        "hallucinated_action",
    ]
    m = pl.rollout_metrics([good, malformed, hallucinated], REWARD)
    assert m["tool_call_valid_rate"] == pytest.approx(5 / 6) and m["end/submitted"] == 3.0
    assert m["invalid_turn_rate"] == pytest.approx(1 / 6) and m["hallucinated_turn_rate"] == pytest.approx(
        1 / 6
    )
    assert not any(k.startswith("opt/") and v for k, v in m.items())  # no final_plan: no toy plan shares


@pytest.mark.parametrize("reward", [REWARD, PER_TURN], ids=["final", "per_turn"])
def test_pack_reads_a_trajectory_its_dict_and_its_jsonl_line_identically(reward, tmp_path):
    v1 = {"status": "incorrect", "reward": -1.0, "speedups": {}}
    v2 = {"status": "correct", "reward": 2.0, "speedups": {"eager": 1.2}}
    trajs = [
        _agent_trajectory(
            [[CallRecord("verify", ok=True, verdict=v1)], [CallRecord("verify", verdict=v2)]], 2.0, "g"
        ),
        _agent_trajectory([[CallRecord("verify", verdict=v2)], [CallRecord("submit", ok=True)]], 3.0, "g"),
        _agent_trajectory([[CallRecord("verify", verdict=v1)]], -1.0),
    ]
    write(tmp_path / "t.jsonl", trajs)
    back = read_trajectories(tmp_path / "t.jsonl")
    assert back == trajs  # the JSONL round trip is exact
    cfg = rl.PackConfig(max_len=32, pad_to=8, rows_multiple=4)
    packs = [rl.pack_trajectories(x, reward, cfg) for x in (trajs, [t.to_dict() for t in trajs], back)]
    for batch, drops, kept in packs[1:]:
        assert kept == packs[0][2] == [0, 1, 2] and drops == packs[0][1]
        for name in (
            "tokens",
            "response_mask",
            "old_logprobs",
            "token_rewards",
            "token_discounts",
            "turn_ids",
        ):
            np.testing.assert_array_equal(getattr(batch, name), getattr(packs[0][0], name), err_msg=name)
        np.testing.assert_array_equal(batch.group_ids, packs[0][0].group_ids)
    batch = packs[0][0]
    # by hand: prompt 3 tokens, turn k's tokens at 3 + 5k .. 3 + 5k + 2, an observation of 2 between
    ends = {0: [5, 10], 1: [5, 10], 2: [5]}
    want = {
        "final": {0: [0, 2.0], 1: [0, 3.0], 2: [-1.0]},
        "per_turn": {0: [-1.0, 2.0], 1: [2.0, 0], 2: [-1.0]},
    }
    for row, idx in ends.items():
        np.testing.assert_array_equal(batch.token_rewards[row, idx], want[reward.placement][row])
    assert batch.group_ids[0] == batch.group_ids[1] != batch.group_ids[2]  # group "g"; None: its own
    np.testing.assert_allclose(batch.old_logprobs[0, 3:6], [-0.1, -0.2, -0.3])
    assert batch.response_mask[0, 3:13].tolist() == [1, 1, 1, 0, 0, 1, 1, 1, 0, 0]


def test_older_toy_records_read_with_their_turn_fields():
    """A toy record as the rollout wrote it before research.rollout (a resumed RFT stage reads its JSONL)."""
    old = {
        "prompt_ids": [1, 5, 3],
        "response_ids": [7, 2, 80, 81, 8, 2],
        "response_mask": [1, 1, 0, 0, 1, 1],
        "logprobs": [-0.5, -0.5, 0.0, 0.0, -0.5, -0.5],
        "turn_ids": [0, 0, -1, -1, 1, 1],
        "turns": [
            {
                "start": 0,
                "end": 2,
                "finish": "eos",
                "plan": None,
                "stop": False,
                "hallucinated": False,
                "error": "not a plan",
                "status": "invalid_plan",
                "reward": -1.0,
                "speedups": {},
                "cached": False,
            },
            {
                "start": 4,
                "end": 6,
                "finish": "eos",
                "plan": "K relu B1024 V1 W4 M1",
                "stop": False,
                "hallucinated": True,
                "status": "correct",
                "reward": 1.0,
                "speedups": {"eager": 0.9},
            },
        ],
        "group": "0:0",
        "task_id": "toy/1",
        "split": "train",
        "verdict": {"status": "correct", "reward": 1.0, "speedups": {"eager": 0.9}, "error": None},
        "final_plan": "K relu B1024 V1 W4 M1",
    }
    t0, t1 = rl_turns = Trajectory.from_dict(old).turns
    assert t0.invalid and t0.verdict["status"] == "invalid_plan" and t0.error == "not a plan"
    assert not t1.invalid and t1.hallucinated and t1.action == "K relu B1024 V1 W4 M1"
    assert [t.verdict["reward"] for t in rl_turns] == [-1.0, 1.0]
    assert pl.rejection_reason(old, pl.RFTFilterConfig(), REWARD) == "invalid_action"
    batch, _, _ = rl.pack_trajectories([old], PER_TURN, rl.PackConfig(pad_to=1))
    np.testing.assert_array_equal(batch.token_rewards[0], [0, 0, 0, 0, -1, 0, 0, 0, 1])
    assert pl.rollout_metrics([old], REWARD)["opt/vector_width"] == 0.0


def test_agent_groups_become_group_ids_and_grpo_advantages_are_per_group():
    """k episodes per task (``AgentEnv`` tags them ``"<cursor>:<task>"``): packing gives each task one group
    id and GRPO normalises within it, checked against numpy (ddof 1, as verl)."""
    import jax.numpy as jnp

    from research.rollout import TrajectoryBuilder

    trajs = []
    for group, reward in [("7:0", 1.0), ("7:1", -1.0), ("7:0", -1.0), ("7:1", -1.0), ("7:0", 1.0)]:
        b = TrajectoryBuilder([1, 2, 3], task_id=f"t{group}", group=group)
        b.policy([4, 5], [-0.5, -0.5], "eos")
        trajs.append(b.build({"status": "correct" if reward > 0 else "incorrect", "reward": reward}))
    batch, drops, kept = rl.pack_trajectories(trajs, rl.RewardConfig(), rl.PackConfig(max_len=16, pad_to=8))
    assert kept == [0, 1, 2, 3, 4] and not drops
    assert list(np.asarray(batch.group_ids)) == [0, 1, 0, 1, 0]
    adv = rl.compute_advantages(
        jnp.asarray(batch.token_rewards),
        None,
        jnp.asarray(batch.response_mask),
        jnp.asarray(batch.token_discounts),
        jnp.asarray(batch.turn_ids),
        jnp.asarray(batch.group_ids),
        rl.AdvantageConfig(estimator="grpo"),
    )[0]
    rows = np.asarray(adv)[:, 4]  # the first policy token of each row
    r0 = np.array([1.0, -1.0, 1.0])
    want0 = (r0 - r0.mean()) / (r0.std(ddof=1) + 1e-6)
    np.testing.assert_allclose(rows[[0, 2, 4]], want0, rtol=1e-4)
    np.testing.assert_allclose(rows[[1, 3]], 0.0, atol=1e-6)  # equal rewards: nothing to prefer
