"""Rollout-level metrics of a list of trajectories (what each RL step and each evaluation logs).

Shares are over the episodes that were not dropped (a verdict that is not the policy's doing is counted
in ``dropped/*`` and is no one's success or failure), like CUDA Agent's rates over all tasks attempted.
``faster_*`` use CUDA Agent's 5% margin on the final verdict; ``end/<reason>`` count every episode by
``Trajectory.end_reason`` (dropped ones too: why an episode ended is what explains many drops);
``tool_call_valid_rate`` is the share of tool calls that parsed and fit their schema (only when there were
tool calls: the agent loop's episodes); ``opt/*`` are shares of toy final plans (``info["final_plan"]``)
using each optimisation absent from the pretraining corpus (``research.toyenv.OPTIMISATIONS``;
``opt/any``: at least one).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from research.rollout import Trajectory, as_trajectory
from research.toyenv import Judgement, optimisation_shares, parse_plan

from .._rewards import DropCounter, Dropped, RewardConfig
from .filters import episode_reward, is_hallucinated, is_invalid


def rollout_metrics(records: list[Trajectory | dict], reward: RewardConfig, prefix: str = "") -> dict:
    drops = DropCounter()
    rewards, passed, eager, compiled, plans, tiers, ends = [], [], [], [], [], Counter(), Counter()
    turns, invalid, halluc, lengths, calls_valid = [], [], [], [], []
    for rec in map(as_trajectory, records):
        if rec.end_reason:
            ends[rec.end_reason] += 1
        try:
            r = episode_reward(rec, reward)
        except Dropped as d:
            drops[d.reason] += 1
            continue
        v = rec.verdict or {}
        j = Judgement(v.get("status", ""), r, dict(v.get("speedups") or {}))
        rewards.append(r)
        tiers[r] += 1
        passed.append(j.correct)
        eager.append(j.faster_than("eager"))
        compiled.append(j.faster_than("compile"))
        if rec.info.get("final_plan"):
            plans.append(parse_plan(rec.info["final_plan"]))
        acts = [t for t in rec.turns if not t.stop]
        turns.append(len(acts))
        invalid += [is_invalid(t) for t in acts]
        halluc += [is_hallucinated(t) for t in acts]
        calls_valid += [c.valid for t in acts for c in t.calls]
        lengths.append(rec.policy_tokens)
    mean = lambda xs: float(np.mean(xs)) if xs else 0.0
    out = {
        "episodes": float(len(rewards)),
        "reward_mean": mean(rewards),
        "pass_rate": mean(passed),
        "faster_eager": mean(eager),
        "faster_compile": mean(compiled),
        "turns_mean": mean(turns),
        "invalid_turn_rate": mean(invalid),
        "hallucinated_turn_rate": mean(halluc),
        "response_tokens_mean": mean(lengths),
    }
    if calls_valid:
        out["tool_call_valid_rate"] = mean(calls_valid)
    n = max(len(rewards), 1)
    out.update({f"tier/{k:g}": v / n for k, v in sorted(tiers.items())})
    out.update({f"end/{k}": float(v) for k, v in sorted(ends.items())})
    if plans:  # toy episodes only: agent-loop episodes write source text, not plans
        shares = optimisation_shares(plans)
        out.update({f"opt/{k}": v * len(plans) / n for k, v in shares.items()})
    out.update(drops.as_metrics())
    return {f"{prefix}{k}": v for k, v in out.items()}
