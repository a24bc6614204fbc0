"""The CPU stand-in judge: its cost model against the H200 timings it was fitted on (the fused plans it never
saw included), the tail-mask rule, tiers and invalid plans. A development aid: no result uses it."""

from __future__ import annotations

import dataclasses
import json
import statistics

import pytest

from research.toyenv import make_tasks, parse_plan
from research.toyenv.standin import DEFAULT_TIMINGS, StandInJudge

ROWS = json.loads(DEFAULT_TIMINGS.read_text())["rows"]


@pytest.fixture(scope="module")
def judge():
    return StandInJudge()


@pytest.fixture(scope="module")
def tasks():
    from research.rl.pipeline.demo import demo_pipeline

    taskset = make_tasks(demo_pipeline("/tmp/unused", "unused.jsonl").tasks)
    return {t.id: t for t in taskset.tasks}


def test_cost_model_against_the_measured_grid(judge, tasks):
    ratios: dict[str, list[float]] = {}
    for r in ROWS:
        pred = judge.speedup(tasks[r["task"]], parse_plan(r["text"]))
        ratios.setdefault(r["plan"], []).append(pred / r["speedup_eager"])
    med = {k: statistics.median(v) for k, v in ratios.items()}
    assert len(ratios) == 8 and all(len(v) == 24 for v in ratios.values())
    for name in ("unfused_B128_W1", "unfused_B256_W2", "unfused_B1024_W4", "unfused_B4096_W8"):
        assert med[name] == pytest.approx(1.0, abs=0.02), (name, med[name])
    # the fused plans are no part of the fit: predicted from the unfused ones
    assert 0.9 < med["fused_B1024_W4"] < 1.25 and 0.9 < med["fused_B4096_W8"] < 1.25, med


def test_tail_mask_rule_tiers_and_invalid_plans(judge, tasks):
    r = next(r for r in ROWS if r["plan"] == "unfused_B1024_W4" and len(r["ops"]) > 1)
    task = tasks[r["task"]]
    pow2 = dataclasses.replace(task, cols=4096)
    odd = dataclasses.replace(task, cols=3000)
    unmasked = parse_plan(r["text"].replace("M1", "M0"))
    rows_divide = all(task.rows % (k.rows or 1) == 0 for k in unmasked.kernels)
    assert judge.correct(pow2, unmasked) == (task.rows * 4096 % 1024 == 0 and rows_divide)
    assert not judge.correct(odd, unmasked) and judge.correct(odd, parse_plan(r["text"]))
    wrong_ops = " ".join(f"K {o}" for o in reversed(task.ops))
    [ok, bad, invalid] = judge.judge_many([(odd, r["text"]), (odd, unmasked), (odd, wrong_ops + " K relu")])
    assert ok.status == "correct" and ok.reward == (2.0 if ok.speedups["eager"] > 1.05 else 1.0)
    assert ok.speedups["eager"] == pytest.approx(judge.speedup(odd, parse_plan(r["text"])))
    assert bad.status == "incorrect" and bad.reward == -1.0
    assert invalid.status == "invalid_plan" and invalid.reward == judge.invalid_reward
    with pytest.raises(KeyError, match="no timings"):
        judge.speedup(dataclasses.replace(task, id="unknown"), parse_plan(r["text"]))
