"""The judge's memory plan (``kernels_env.judge.check.memory``): the planner as a pure function, the
out-of-memory rule, and CPU judgements under a small configured budget."""

from __future__ import annotations

import pytest
import torch

from kernels_env.guard import GuardViolation, Violation
from kernels_env.guard._checks import GUARD_ERROR
from kernels_env.judge.check import oom
from kernels_env.judge.check.memory import Footprint, GiB, plan
from kernels_env.rules.config import JudgeConfig

from .conftest import RELU_PROBLEM, RELU_TRITON, relu_with, src

FAMILIES = ("nan_inf", "denormal", "large", "zeros", "negative", "shape", "init_args")
H200_FREE = 138 * GiB


def test_plan_for_the_largest_kernelbench_footprints():
    # L1 45_Average_Pooling_2D: 16 GiB in, 0.13 GiB out. One timing set (no second one fits the 8 GiB input
    # budget); every family fits with the candidate's 2x headroom, a 1.5x batch does not.
    pool = plan(Footprint(16 * GiB, GiB // 8), H200_FREE, FAMILIES, 3)
    assert pool.timing_sets == 1 and not pool.families_skipped and pool.shape_growth == 1.0
    assert pool.headroom_ok and pool.trials_fit
    # L1 39_L2Norm_: 8 GiB in, 8 GiB out: every family, not a 1.5x batch (the family would skip it anyway).
    norm = plan(Footprint(8 * GiB, 8 * GiB), H200_FREE, FAMILIES, 3)
    assert norm.timing_sets == 1 and not norm.families_skipped and norm.shape_growth == 1.0
    assert norm.headroom_ok and norm.headroom_bytes >= 32 * GiB
    # A small task: every set it asks for, growth, and the whole rest as headroom.
    small = plan(Footprint(2**20, 2**20, 2**20), H200_FREE, FAMILIES, 3)
    assert small.timing_sets == 3 and small.shape_growth == 1.5
    assert small.headroom_bytes > 130 * GiB


def test_plan_under_a_small_budget_skips_families_and_says_why():
    f = Footprint(GiB, GiB)
    tight = plan(f, 14 * GiB, FAMILIES, 3)  # 8 GiB per family + 4 GiB headroom fits; growth does not
    assert not tight.families_skipped and tight.shape_growth == 1.0 and tight.timing_sets == 3
    tiny = plan(f, 10 * GiB, FAMILIES, 3, free_source="budget")
    assert set(tiny.families_skipped) == set(FAMILIES) and tiny.timing_sets == 1
    assert (
        "needs 8.00 GiB plus 4.00 GiB of headroom for the candidate, 9.50 GiB usable"
        in (tiny.families_skipped["zeros"])
    )
    assert tiny.trials_fit and not tiny.headroom_ok  # the trials run anyway; an OOM then is the judge's
    d = tiny.to_dict()
    assert d["footprint"]["total"] == 2 * GiB and d["free_source"] == "budget" and d["headroom_ok"] is False
    init = plan(Footprint(GiB, GiB, 0, 3 * GiB), 14 * GiB, ("zeros", "init_args"), 1)
    assert list(init.families_skipped) == ["init_args"]  # rebuilding both models costs their parameters


def test_the_retry_plan_is_smaller():
    f = Footprint(GiB, GiB)
    first, retry = plan(f, 25 * GiB, FAMILIES, 3), plan(f, 25 * GiB, FAMILIES, 3, retry=True)
    assert (first.timing_sets, first.shape_growth, first.families_skipped) == (3, 1.5, {})
    assert (retry.timing_sets, retry.shape_growth, retry.families_skipped) == (1, 1.0, {})
    assert not plan(f, 19 * GiB, FAMILIES, 3).families_skipped  # 8 GiB + 4 GiB headroom <= 18.5 GiB usable
    tight = plan(f, 19 * GiB, FAMILIES, 3, retry=True)
    assert set(tight.families_skipped) == set(FAMILIES)  # the retry wants 2 x 8 GiB + 4 GiB


def test_what_counts_as_out_of_memory():
    assert oom.is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB"))
    assert oom.is_oom(RuntimeError("CUDA error: out of memory"))
    failed = Violation(GUARD_ERROR, "guard failed while checking: OutOfMemoryError('CUDA out of memory')")
    assert oom.is_oom(GuardViolation(failed))
    assert not oom.is_oom(GuardViolation(Violation(GUARD_ERROR, "guard failed while checking: KeyError")))
    assert not oom.is_oom(ValueError("out of range"))

    def raise_here():
        raise torch.OutOfMemoryError("x")

    with pytest.raises(torch.OutOfMemoryError) as info:
        raise_here()
    assert oom.raised_in(info.value, {__file__}) and not oom.raised_in(info.value, {"/elsewhere.py"})


def _judge(client, solution, problem=RELU_PROBLEM, **judge):
    fast = {"time_candidate": False, "num_trials": 1, "families": ["zeros", "shape"]}
    config = JudgeConfig(**{**fast, **judge})
    return client.evaluate(reference=src(problem), solution=src(solution), judge=config)


def test_a_small_budget_is_planned_for_and_recorded(client):
    res = _judge(client, RELU_TRITON, memory_budget_gb=30e3 / GiB)  # 30 kB for a 4 kB + 4 kB task
    assert res["status"] == "correct", res["error"]
    mp = res["judge"]["memory_plan"]
    assert mp["free_source"] == "budget" and mp["free_bytes"] == 30000 and mp["timing_sets"] == 1
    assert mp["footprint"]["inputs"] == mp["footprint"]["outputs"] == 4096
    fams = res["correctness"]["families"]
    assert {n: f["status"] for n, f in fams.items()} == {"zeros": "skipped", "shape": "skipped"}
    assert fams["shape"]["reason"].startswith("memory plan: the shape family needs")
    roomy = _judge(client, RELU_TRITON)
    assert roomy["judge"]["memory_plan"]["free_source"] == "device"
    assert roomy["correctness"]["families"]["shape"]["reason"] == "batch shrunk and grown 1.5x"


# The reference's first call (the judge's footprint measurement) runs out of memory, as it would when the
# judge held too much: never the reference's or the candidate's fault; the retry plan judges it.
OOM_ONCE_PROBLEM = RELU_PROBLEM.replace(
    "    def forward(self, x):\n",
    "    calls = 0\n\n    def forward(self, x):\n"
    "        Model.calls += 1\n"
    "        if Model.calls == 1:\n"
    "            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 18.00 GiB')\n",
)
OOM_ALWAYS_PROBLEM = OOM_ONCE_PROBLEM.replace("if Model.calls == 1:", "if True:")
CANDIDATE_OOM = relu_with("raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 900.00 GiB')")


def test_the_judges_oom_is_retried_with_the_smaller_plan_then_judge_error(client):
    res = _judge(client, RELU_TRITON, problem=OOM_ONCE_PROBLEM)
    assert res["status"] == "correct", res["error"]
    assert res["judge"]["memory_plan"]["retry"] is True
    res = _judge(client, RELU_TRITON, problem=OOM_ALWAYS_PROBLEM)
    assert res["status"] == "judge_error" and res["reward"] is None
    assert "ran out of memory twice" in res["error"] and "judge code" in res["error"]


def test_the_candidates_own_oom_is_its_runtime_error_only_with_its_headroom(client):
    res = _judge(client, CANDIDATE_OOM)
    assert res["status"] == "runtime_error" and "left to the candidate" in res["error"], res["error"]
    starved = _judge(client, CANDIDATE_OOM, memory_budget_gb=30e3 / GiB)
    assert starved["status"] == "judge_error", starved["error"]
    assert "inside the candidate, short of its headroom" in starved["error"]


# 40 GB of float32 inputs (issue 31): judged "insufficient_memory" from its source before the worker builds
# any input or imports the candidate; never a candidate's runtime_error, never the OOM killer.
HUGE_PROBLEM = RELU_PROBLEM.replace("N = 1024", "N = 10**10")


def test_a_problem_too_large_for_the_host_is_not_run(client):
    res = _judge(client, RELU_TRITON, problem=HUGE_PROBLEM)
    assert res["status"] == "insufficient_memory" and res["reward"] is None, res["error"]
    assert "\n" not in res["error"] and "needs ~" in res["error"] and "this host has" in res["error"]
    estimate = res["judge"]["memory_estimate"]
    assert estimate["exact"] and estimate["footprint"]["inputs"] == 4 * 10**10
    assert estimate["required_bytes"] > estimate["free_bytes"]
    # Nothing ran: no memory plan (the footprint's measurement builds inputs), no trial, no candidate load.
    assert res["judge"]["memory_plan"] is None and res["correctness"] is None
    assert set(res["durations_s"]["run_phases"]) <= {"load", "memory estimate", "cleanup"}


# The same preflight on a GPU worker (issue 31): 400 GB of float32 inputs against the device's free memory
# (torch.cuda.mem_get_info), judged before the worker builds anything on the device.
@pytest.mark.gpu
def test_a_problem_too_large_for_the_gpu_is_not_run(tmp_path):
    from kernels_env.client import SandboxClient
    from kernels_env.rules.config import SandboxConfig

    config = SandboxConfig(device="cuda", cache_dir=str(tmp_path), num_compile_workers=1, run_timeout_s=120)
    with SandboxClient(config) as sb:
        res = sb.evaluate(
            reference=src(RELU_PROBLEM.replace("N = 1024", "N = 10**11")),
            solution=src(RELU_TRITON),
            judge=JudgeConfig(time_candidate=False, num_trials=1),
        )
    assert res["status"] == "insufficient_memory" and res["reward"] is None, res["error"]
    assert "\n" not in res["error"] and "this GPU has" in res["error"], res["error"]
    estimate = res["judge"]["memory_estimate"]
    assert estimate["free_source"] == "device" and estimate["footprint"]["inputs"] == 4 * 10**11
    assert 0 < estimate["free_bytes"] < estimate["required_bytes"]
    assert res["correctness"] is None and res["judge"]["memory_plan"] is None
    print("REPORT", res["error"])
