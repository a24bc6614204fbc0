"""Plans judged by the real sandbox in CPU mode (Triton interpreter, strict policy): right plans are
correct, wrong ones are not, and the cache answers repeats without judging again."""

from __future__ import annotations

import pytest

from kernels_env.client import JudgeConfig
from research.toyenv import (
    TOY_OPS,
    JudgeCache,
    PlanJudge,
    ToyTask,
    baseline_plan,
    corpus_plans,
    cpu_size,
)

from .conftest import FAST


def _pick(tasks) -> ToyTask:
    """A task that starts elementwise and has a row op, at 6 x 100 (100 columns: not a power of two;
    600 elements: no elementwise tile divides them)."""
    for t in tasks.tasks:
        kinds = [TOY_OPS[o].kind for o in t.ops]
        if kinds[0] == "map" and any(k != "map" for k in kinds):
            return t.at_size(6, 100)
    raise LookupError("no such task in the fixture set")


@pytest.fixture(scope="module")
def judge(sandbox, tmp_path_factory):
    return PlanJudge(sandbox, FAST, JudgeCache(tmp_path_factory.mktemp("toy_judge") / "cache.jsonl"))


def test_right_plans_are_correct_under_the_strict_policy(judge, tasks):
    task = _pick(tasks)
    assert judge.judge_config.policy == "strict"
    ops = " ".join(task.ops)
    for plan in (baseline_plan(task), f"K {ops}", f"K {ops} R2 W8"):
        res = judge.judge(task, plan)
        assert res.status == "correct" and res.reward == 1.0, res


def test_missing_tail_mask_on_a_row_kernel_is_incorrect(judge, tasks):
    task = _pick(tasks)
    res = judge.judge(task, "K " + " ".join(task.ops) + " M0")
    assert res.status == "incorrect" and res.reward == -1.0, res
    # the same plan is right where the row width is a power of two and the rows divide the row tile
    res = judge.judge(task.at_size(6, 64), "K " + " ".join(task.ops) + " R2 M0")
    assert res.status == "correct", res


def test_missing_tail_mask_on_an_elementwise_kernel_leaves_the_tail_unwritten(judge, tasks):
    task = _pick(tasks)
    plan = f"K {task.ops[0]} B256 M0 " + " ".join(f"K {o}" for o in task.ops[1:])
    res = judge.judge(task, plan)
    # the sandbox poisons fresh outputs: the never-written tail is caught as such
    assert res.status == "rejected" and "never written" in res.error and res.reward == -1.0, res


def test_wrong_order_and_wrong_axis_are_incorrect_and_a_wrong_op_is_invalid(judge, tasks):
    task = _pick(tasks)
    ops = list(task.ops)
    row = next(i for i, o in enumerate(ops) if TOY_OPS[o].kind != "map")
    wrong_axis = [*ops[: row + 1], "ax0", *ops[row + 1 :]]
    plans = {"axis": "K " + " ".join(wrong_axis)}
    if len(set(ops)) > 1:
        plans["order"] = "K " + " ".join(reversed(ops))
    for name, plan in plans.items():
        res = judge.judge(task, plan)
        assert res.status == "incorrect" and res.reward == -1.0, (name, plan, res)
    before = dict(judge.stats)
    wrong_op = ["gelu" if ops[0] != "gelu" else "relu", *ops[1:]]
    res = judge.judge(task, "K " + " ".join(wrong_op))  # never judged: it does not say it computes the task
    assert res.status == "invalid_plan" and res.reward == -1.0 and "not the task's" in res.error, res
    assert judge.stats["judged"] == before["judged"]


def test_invalid_plans_earn_the_failure_reward_without_the_sandbox(judge, tasks):
    before = dict(judge.stats)
    res = judge.judge(tasks.tasks[0], "K relu B1000")
    assert res.status == "invalid_plan" and res.reward == -1.0 and "B takes one of" in res.error
    assert judge.stats["judged"] == before["judged"]


def test_corpus_plans_are_correct_on_a_sample(judge, tasks):
    sample = [cpu_size(t) for t in tasks.tasks[:: max(1, len(tasks.tasks) // 5)][:5]]
    pairs = corpus_plans(sample)[::3]
    results = judge.judge_many(pairs)
    bad = [(t.ops, p.text(), r.status, r.error) for (t, p), r in zip(pairs, results) if r.status != "correct"]
    assert not bad, bad


def test_cache_answers_repeats_and_survives_a_restart(sandbox, tasks, tmp_path):
    path = tmp_path / "cache.jsonl"
    judge = PlanJudge(sandbox, FAST, JudgeCache(path))
    task = cpu_size(tasks.tasks[1])
    plans = [baseline_plan(task), "K " + " ".join(task.ops), baseline_plan(task)]
    first = judge.judge_many([(task, p) for p in plans])
    assert judge.stats["judged"] == 2  # the repeated plan inside one batch is judged once
    assert [r.status for r in first] == ["correct"] * 3 and not any(r.cached for r in first)
    again = PlanJudge(sandbox, FAST, JudgeCache(path)).judge_many([(task, p) for p in plans])
    assert all(r.cached for r in again) and [r.key for r in again] == [r.key for r in first]
    fresh = PlanJudge(sandbox, FAST, JudgeCache(path))
    res = fresh.judge(task, plans[0], use_cache=False)
    assert not res.cached and fresh.stats["judged"] == 1
    # another judge setting is another key; a cut-off last line (a killed run) is ignored
    other = PlanJudge(sandbox, JudgeConfig(time_candidate=False, num_trials=1, families=[]), JudgeCache(path))
    assert not other.judge(task, plans[0]).cached
    with path.open("a") as f:
        f.write('{"key": "abc", "verd')
    assert len(JudgeCache(path)) == 3
