"""Rollout-level metrics of a list of toy trajectory records (what each RL step and each evaluation logs).

Shares are over the episodes that were not dropped (a verdict that is not the policy's doing is counted
in ``dropped/*`` and is no one's success or failure), like CUDA Agent's rates over all tasks attempted.
``faster_*`` use CUDA Agent's 5% margin on the final plan; ``opt/*`` are shares of final plans using each
optimisation absent from the pretraining corpus (``research.toyenv.OPTIMISATIONS``; ``opt/any``: at
least one).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from research.toyenv import Judgement, optimisation_shares, parse_plan

from .._rewards import DropCounter, Dropped, RewardConfig
from .filters import episode_reward


def rollout_metrics(records: list[dict], reward: RewardConfig, prefix: str = "") -> dict[str, float]:
    drops = DropCounter()
    rewards, passed, eager, compiled, plans, tiers = [], [], [], [], [], Counter()
    turns, invalid, halluc, lengths = [], [], [], []
    for rec in records:
        try:
            r = episode_reward(rec, reward)
        except Dropped as d:
            drops[d.reason] += 1
            continue
        v = rec["verdict"] or {}
        j = Judgement(v.get("status", ""), r, dict(v.get("speedups") or {}))
        rewards.append(r)
        tiers[r] += 1
        passed.append(j.correct)
        eager.append(j.faster_than("eager"))
        compiled.append(j.faster_than("compile"))
        if rec.get("final_plan"):
            plans.append(parse_plan(rec["final_plan"]))
        acts = [t for t in rec.get("turns") or [] if not t.get("stop")]
        turns.append(len(acts))
        invalid += [t.get("status") == "invalid_plan" for t in acts]
        halluc += [bool(t.get("hallucinated")) for t in acts]
        lengths.append(int(np.sum(rec["response_mask"])))
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
    n = max(len(rewards), 1)
    out.update({f"tier/{k:g}": v / n for k, v in sorted(tiers.items())})
    shares = optimisation_shares(plans)
    out.update({f"opt/{k}": v * len(plans) / n for k, v in shares.items()})
    out.update(drops.as_metrics())
    return {f"{prefix}{k}": v for k, v in out.items()}
