"""Rewards, judge protocols and policies: CUDA Agent tiers at the 5% boundary, registries, tolerances."""

from __future__ import annotations

import math

import pytest

from kernels_env.rules import policies, rewards
from kernels_env.rules import protocols as presets
from kernels_env.rules.config import JudgeConfig
from kernels_env.rules.result import (
    CORRECT,
    FAILURES,
    NO_VERDICT,
    NOT_RUN,
    REJECTED,
    STATUSES,
    new_result,
    validate,
)


def speed(t0: float, t: float) -> float:
    return t0 / t


@pytest.mark.parametrize(
    ("status", "eager", "compile_", "expected"),
    [
        ("correct", speed(1.0, 1.0), speed(1.0, 1.0), 1.0),
        ("correct", speed(1.0, 0.951), speed(1.0, 0.5), 1.0),  # 4.9% faster than eager: not enough
        ("correct", speed(1.0, 0.949), speed(1.0, 1.2), 2.0),  # 5.1% faster than eager only
        ("correct", speed(1.0, 0.949), speed(0.5, 0.474), 3.0),  # >5% faster than both
        ("correct", speed(1.0, 1.5), speed(2.0, 1.0), 1.0),  # faster than compile but not eager: tier 1
        ("correct", None, None, 1.0),  # CPU mode: speed unknown
        ("incorrect", 10.0, 10.0, -1.0),
        ("compile_error", None, None, -1.0),
        ("runtime_error", None, None, -1.0),
        ("timeout", None, None, -1.0),
        ("rejected", 10.0, 10.0, -1.0),
        ("not_run", None, None, None),
    ],
)
def test_cuda_agent_tiers(status, eager, compile_, expected):
    assert rewards.get_reward("cuda_agent")(status, {"eager": eager, "compile": compile_}) == expected


def test_five_percent_means_t0_minus_t_over_t0():
    # (t0 - t) / t0 > 0.05  <=>  t < 0.95 t0; exactly 5% is not "more than 5%"
    assert not rewards.faster(1 / 0.95)
    assert rewards.faster(1 / 0.9499)
    assert not rewards.faster(float("nan")) and not rewards.faster(None) and not rewards.faster(0.0)


def test_alternative_rewards():
    s = {"eager": 2.0}
    assert rewards.get_reward("binary")(CORRECT, s) == 1.0
    assert rewards.get_reward("binary")("incorrect", s) == 0.0
    assert rewards.get_reward("speedup")(CORRECT, s) == 2.0
    assert rewards.get_reward("speedup")("timeout", s) == 0.0
    assert rewards.get_reward("log_speedup")(CORRECT, s) == pytest.approx(math.log(2.0))
    # a correct but very slow solution still beats any failure
    assert rewards.get_reward("log_speedup")(CORRECT, {"eager": 1e-6}) > rewards.get_reward("log_speedup")(
        "incorrect", s
    )
    for name in rewards.REWARDS:
        assert rewards.get_reward(name)(NOT_RUN, s) is None
    with pytest.raises(ValueError, match="unknown reward 'nope'.*cuda_agent"):
        rewards.get_reward("nope")


def test_protocol_presets():
    kb = presets.resolve(JudgeConfig(protocol="kernelbench"), "cpu")
    assert kb["weight_sync"] == "seed" and kb["mode"] == "train" and kb["num_trials"] == 5
    assert kb["tolerances"]["float32"] == [1e-4, 1e-4] and kb["tolerances"]["float16"] == [1e-2, 1e-2]
    ca = presets.resolve(JudgeConfig(protocol="cuda_agent", policy="cuda_agent"), "cpu")
    assert ca["weight_sync"] == "auto" and ca["mode"] == "eval"
    assert ca["tolerances"]["float32"] == [1e-2, 1e-2] and ca["allow_tf32"] is True


def test_policy_tolerance_floor_and_overrides():
    # kernelbench tolerances with a policy that allows TF32: fp32 tolerance raised to the policy's floor
    s = presets.resolve(JudgeConfig(protocol="kernelbench", policy="cuda_agent"), "cpu")
    assert s["tolerances"]["float32"] == [1e-2, 1e-2] and s["tolerances"]["float64"] == [1e-4, 1e-4]
    s = presets.resolve(JudgeConfig(atol=1e-3, num_trials=2, order="candidate_first", mode="eval"), "cpu")
    assert all(t[0] == 1e-3 for t in s["tolerances"].values())
    assert s["tolerances"]["float32"][1] == 1e-4
    assert (s["num_trials"], s["order"], s["mode"]) == (2, "candidate_first", "eval")


@pytest.mark.parametrize(
    ("judge", "match"),
    [
        (JudgeConfig(protocol="nope"), "unknown judge protocol"),
        (JudgeConfig(policy="nope"), "unknown policy"),
        (JudgeConfig(reward="nope"), "unknown reward"),
        (JudgeConfig(weight_sync="copy"), "weight_sync"),
        (JudgeConfig(order="random"), "order"),
        (JudgeConfig(num_trials=0), "num_trials"),
        (JudgeConfig(baselines=["eager", "tensorrt"]), "unknown baseline modes"),
    ],
)
def test_bad_judge_settings_fail_before_any_work(judge, match):
    with pytest.raises(ValueError, match=match):
        presets.resolve(judge, "cpu")


def test_policy_guard_seam_is_the_guard_in_the_judge():
    """``policies`` alone is data plus a seam; the judge (``kernels_env.judge.run.enforce``, imported by every
    run worker) points the seam at the guard, and every policy has guard rules under the same name."""
    import torch

    from kernels_env.guard import GuardViolation
    from kernels_env.judge.run import enforce  # noqa: F401 - installs the enforcing factory

    assert policies.guard_enforced()
    with pytest.raises(GuardViolation) as caught, policies.policy_guard("strict", device="cpu", census=False):
        torch.relu(torch.rand(4))
    assert isinstance(caught.value, policies.PolicyViolation) and caught.value.check == "forbidden_op"
    assert policies.get_policy("cuda_agent").allowed_libraries == ("cublas", "cudnn")
    violation = policies.PolicyViolation("torch_compute", evidence={"op": "aten::mm"})
    assert violation.check == "torch_compute"


def test_result_schema():
    r = new_result(status=CORRECT, stage="done")
    validate(r)
    assert set(STATUSES) == set(FAILURES) | {CORRECT} | set(NO_VERDICT)  # every status: one of the three
    assert not set(FAILURES) & set(NO_VERDICT)
    with pytest.raises(ValueError, match="names the check"):
        validate(new_result(status=REJECTED, stage="correctness"))
    with pytest.raises(ValueError):
        new_result(status="great", stage="done")
