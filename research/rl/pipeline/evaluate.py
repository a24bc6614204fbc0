"""Evaluating a policy on held-out toy tasks: greedy, one episode per task, every verdict judged fresh
(``EvalConfig.fresh``: the evaluation environment's judge has no cache), metrics per split
(``rollout_metrics``: pass rate, faster than eager / compile, mean reward, optimisation shares)."""

from __future__ import annotations

import dataclasses

from research.rollout import RolloutConfig
from research.toyenv.rollout import ToyEnv

from .._rewards import RewardConfig
from .config import EvalConfig
from .rollout_metrics import rollout_metrics


def eval_rollout(base: RolloutConfig, cfg: EvalConfig) -> RolloutConfig:
    """The training rollout's buckets (no new compilation but greedy's), greedy, groups of one."""
    return dataclasses.replace(base, turns=cfg.turns, temperature=0.0, group_size=1)


def evaluate_policy(env: ToyEnv, sampler, rollout: RolloutConfig, cfg: EvalConfig, reward: RewardConfig):
    """({split: metrics}, {split: trajectories})."""
    metrics, records = {}, {}
    for split in cfg.splits:
        tasks = env.tasks(split)
        if cfg.max_tasks:
            tasks = tasks[: cfg.max_tasks]
        recs = env.rollout(sampler, rollout, cursor=0, tasks=tasks, groups=[t.id for t in tasks])
        metrics[split] = rollout_metrics(recs, reward)
        metrics[split]["time/generate_s"] = env.timings["generate_s"]
        metrics[split]["time/judge_s"] = env.timings["judge_s"]
        records[split] = recs
    return metrics, records
