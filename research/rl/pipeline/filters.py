"""Rejection fine-tuning filters (CUDA Agent stage 2): pure functions of trajectories.

A trajectory is a ``research.rollout.Trajectory`` (the toy rollout's and the agent loop's alike; a dict
record, e.g. a JSONL line, is read with ``as_trajectory``): its final ``verdict``, ``response_ids`` and
``turns``, each with ``start`` / ``end`` (its policy tokens in ``response_ids``), ``invalid`` (not a valid
action: a toy turn that is no plan, a tool call that did not parse or fit its schema), ``hallucinated``
(it names something the task does not offer: a toy op the task lacks, a tool that was not offered),
``stop`` (it only submitted the previous action) and its tool ``calls`` (``CallRecord.valid`` /
``known`` flag a malformed or hallucinated call the same way).

Kept: reward > ``min_reward`` (0: CUDA Agent keeps positive-reward trajectories), no invalid action, no
hallucinated action, no redundant loop (an identical action, token for token, more than ``max_repeats``
times). Episodes whose verdict is not the policy's doing are dropped and counted like everywhere else
(``research.rl.verdict_reward``). Each dropped record is counted under the first reason it fails, in the
order above (non-policy verdict first). ``rft_filter`` returns the records it keeps as it was given them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from research.rollout import Trajectory, Turn, as_trajectory

from .._rewards import DropCounter, Dropped, RewardConfig, verdict_reward


@dataclass
class RFTFilterConfig:
    min_reward: float = 0.0  # keep reward > min_reward
    drop_invalid: bool = True
    drop_hallucinated: bool = True
    drop_redundant: bool = True
    max_repeats: int = 1  # times one identical action may appear in an episode


def _actions(traj: Trajectory) -> list[Turn]:
    return [t for t in traj.turns if not t.stop]


def episode_reward(record: Trajectory | dict, reward: RewardConfig) -> float:
    """The final reward of a trajectory (:class:`research.rl.Dropped` when it must not become one)."""
    traj = as_trajectory(record)
    if traj.verdict is not None:
        return verdict_reward(traj.verdict, reward)
    if traj.reward is not None:
        return float(traj.reward)
    raise Dropped("no_verdict")


def is_invalid(turn: Turn) -> bool:
    return turn.invalid or any(not c.valid for c in turn.calls)


def is_hallucinated(turn: Turn) -> bool:
    return turn.hallucinated or any(not c.known for c in turn.calls)


def has_invalid_action(record: Trajectory | dict) -> bool:
    return any(is_invalid(t) for t in _actions(as_trajectory(record)))


def has_hallucination(record: Trajectory | dict) -> bool:
    return any(is_hallucinated(t) for t in _actions(as_trajectory(record)))


def has_redundant_loop(record: Trajectory | dict, max_repeats: int = 1) -> bool:
    """An identical action (its policy tokens) repeated more than ``max_repeats`` times (turns without
    tokens, a text policy's, are no evidence of a loop)."""
    traj = as_trajectory(record)
    ids = traj.response_ids
    counts = Counter(tuple(ids[t.start : t.end]) for t in _actions(traj) if t.end > t.start)
    return any(n > max_repeats for n in counts.values())


def rejection_reason(record: Trajectory | dict, cfg: RFTFilterConfig, reward: RewardConfig) -> str | None:
    """Why RFT rejects a trajectory (None: kept)."""
    traj = as_trajectory(record)
    try:
        r = episode_reward(traj, reward)
    except Dropped as d:
        return d.reason
    if cfg.drop_invalid and has_invalid_action(traj):
        return "invalid_action"
    if cfg.drop_hallucinated and has_hallucination(traj):
        return "hallucinated_action"
    if cfg.drop_redundant and has_redundant_loop(traj, cfg.max_repeats):
        return "redundant_loop"
    if not r > cfg.min_reward:
        return "reward_not_positive" if cfg.min_reward == 0.0 else "reward_too_low"
    return None


def rft_filter(records: list, cfg: RFTFilterConfig, reward: RewardConfig) -> tuple[list, DropCounter]:
    """(kept records, as given, rejections counted by reason)."""
    kept, drops = [], DropCounter()
    for rec in records:
        why = rejection_reason(rec, cfg, reward)
        if why is None:
            kept.append(rec)
        else:
            drops[why] += 1
    return kept, drops
