"""Rejection fine-tuning filters (CUDA Agent stage 2): pure functions of trajectory records.

A record is what a rollout writes (``toy_rollout.py``; the agent loop's records carry the same keys):
``verdict`` (final), ``response_ids`` and ``turns``, a list of per-turn dicts with ``start`` / ``end``
(the turn's policy tokens in ``response_ids``), ``status`` (that turn's verdict, ``invalid_plan`` for
tokens that are not a valid action), ``hallucinated`` (the action names something the task does not
have) and ``stop`` (the turn only submitted the previous action).

Kept: reward > ``min_reward`` (0: CUDA Agent keeps positive-reward trajectories), no invalid action, no
hallucinated action, no redundant loop (an identical action, token for token, more than ``max_repeats``
times). Episodes whose verdict is not the policy's doing are dropped and counted like everywhere else
(``research.rl.verdict_reward``). Each dropped record is counted under the first reason it fails, in the
order above (non-policy verdict first).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .._rewards import DropCounter, Dropped, RewardConfig, verdict_reward

INVALID = "invalid_plan"


@dataclass
class RFTFilterConfig:
    min_reward: float = 0.0  # keep reward > min_reward
    drop_invalid: bool = True
    drop_hallucinated: bool = True
    drop_redundant: bool = True
    max_repeats: int = 1  # times one identical action may appear in an episode


def _actions(record: dict) -> list[dict]:
    return [t for t in record.get("turns") or [] if not t.get("stop")]


def episode_reward(record: dict, reward: RewardConfig) -> float:
    """The final reward of a record (:class:`research.rl.Dropped` when it must not become one)."""
    if record.get("verdict") is not None:
        return verdict_reward(record["verdict"], reward)
    if record.get("reward") is not None:
        return float(record["reward"])
    raise Dropped("no_verdict")


def has_invalid_action(record: dict) -> bool:
    return any(t.get("status") == INVALID for t in _actions(record))


def has_hallucination(record: dict) -> bool:
    return any(bool(t.get("hallucinated")) for t in _actions(record))


def has_redundant_loop(record: dict, max_repeats: int = 1) -> bool:
    """An identical action (its policy tokens) repeated more than ``max_repeats`` times."""
    ids = record["response_ids"]
    counts = Counter(tuple(ids[t["start"] : t["end"]]) for t in _actions(record))
    return any(n > max_repeats for n in counts.values())


def rejection_reason(record: dict, cfg: RFTFilterConfig, reward: RewardConfig) -> str | None:
    """Why RFT rejects a record (None: kept)."""
    try:
        r = episode_reward(record, reward)
    except Dropped as d:
        return d.reason
    if cfg.drop_invalid and has_invalid_action(record):
        return "invalid_action"
    if cfg.drop_hallucinated and has_hallucination(record):
        return "hallucinated_action"
    if cfg.drop_redundant and has_redundant_loop(record, cfg.max_repeats):
        return "redundant_loop"
    if not r > cfg.min_reward:
        return "reward_not_positive" if cfg.min_reward == 0.0 else "reward_too_low"
    return None


def rft_filter(
    records: list[dict], cfg: RFTFilterConfig, reward: RewardConfig
) -> tuple[list[dict], DropCounter]:
    """(kept records, rejections counted by reason)."""
    kept, drops = [], DropCounter()
    for rec in records:
        why = rejection_reason(rec, cfg, reward)
        if why is None:
            kept.append(rec)
        else:
            drops[why] += 1
    return kept, drops
