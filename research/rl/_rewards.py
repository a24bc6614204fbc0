"""From sandbox verdicts to token rewards.

A verdict's reward comes from the sandbox's reward registry (``cuda_agent`` tiers, ``speedup``, ...), which
``kernels_env.client`` exports (``get_reward``; research reaches the sandbox only through its client). With
``reward_fn=None`` the reward the sandbox already put in the verdict (``verdict["reward"]``, computed by the
judge's own reward setting) is taken.

Episodes whose verdict is not the policy's doing never become a reward: the statuses of
``kernels_env.client.NO_VERDICT``, the one vocabulary of verdicts (docs/sandbox.md): the judge's own failure
(``judge_error``), a broken reference (``reference_error``), ``not_run`` (CPU mode), what the machine cannot
judge, and ``infra_error`` (a verdict made outside the judge: the sandbox was not reached or the wait for it
ran out; the sandbox's own ``timeout`` status is a candidate that hung, which *is* the policy's doing and
gets the failure reward, as ``no_solution`` does). Dropped episodes are counted by reason.

One exception in training: ``toolchain_missing`` (a solution in a backend whose toolchain this machine
lacks, e.g. CuTe DSL) is the machine's limit for an evaluation, but in RL it is the policy's choice, and
dropping it would be a way out of every negative reward (write CuTe DSL when unsure). It gets the failure
reward of the run's reward function (``reward_fn``, else the verdict's ``reward_fn``).

Placement: ``final`` puts the episode's reward on its last policy token (the default); ``per_turn`` puts
each turn's verdict reward on that turn's last policy token and multiplies the discount by ``turn_gamma``
there, so the return from turn k is sum_j turn_gamma^(j-k) r_j (Kevin-32B's per-turn aggregation).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from kernels_env.client import NO_VERDICT, TOOLCHAIN_MISSING, Registry, failure_reward, get_reward
from research.rollout import Trajectory

# The client's statuses without a reward, but toolchain_missing (see the module doc).
NON_POLICY_STATUSES = tuple(s for s in NO_VERDICT if s != TOOLCHAIN_MISSING)
PLACEMENTS = Registry("reward placement")


@dataclass
class RewardConfig:
    reward_fn: str | None = None  # None: verdict["reward"]; a name: the sandbox's reward registry
    placement: str = "final"  # final | per_turn
    turn_gamma: float = 1.0  # per_turn: discount between turns
    drop_statuses: tuple[str, ...] = NON_POLICY_STATUSES


class Dropped(Exception):
    """An episode that must not become a reward; ``reason`` is what gets counted."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def verdict_reward(verdict: dict, cfg: RewardConfig) -> float:
    """The reward of one sandbox verdict, or :class:`Dropped` (see the module doc)."""
    status = verdict.get("status")
    if status in cfg.drop_statuses:
        raise Dropped(str(status))
    if status == TOOLCHAIN_MISSING:
        name = cfg.reward_fn or verdict.get("reward_fn")
        if not name:
            raise Dropped(f"no_reward:{status}")
        reward = failure_reward(name)
    elif cfg.reward_fn is None:
        reward = verdict.get("reward")
    else:
        reward = get_reward(cfg.reward_fn)(status, verdict.get("speedups") or {})
    if reward is None:
        raise Dropped(f"no_reward:{status}")
    reward = float(reward)
    if not math.isfinite(reward):
        raise Dropped(f"non_finite_reward:{status}")
    return reward


def turn_spans(response_mask) -> list[tuple[int, int]]:
    """[start, end) of each maximal run of policy tokens: a turn ends where an observation begins."""
    m = np.asarray(response_mask, bool)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], m.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


@PLACEMENTS.register("final")
def final_reward(traj: Trajectory, n_turns: int, cfg: RewardConfig) -> list[float]:
    """0 on every turn but the last, which gets the final verdict's reward (``traj.reward`` when the
    trajectory carries no verdict)."""
    if traj.verdict is not None:
        final = verdict_reward(traj.verdict, cfg)
    elif traj.reward is not None:
        final = float(traj.reward)
    else:
        raise Dropped("no_verdict")
    return [0.0] * (n_turns - 1) + [final]


@PLACEMENTS.register("per_turn")
def per_turn_rewards(traj: Trajectory, n_turns: int, cfg: RewardConfig) -> list[float]:
    """Each turn's ``Turn.verdict`` (``info["turn_verdicts"]`` of older records), None for a turn that
    submitted nothing (reward 0)."""
    verdicts = traj.info.get("turn_verdicts", traj.turn_verdicts if traj.turns else None)
    if verdicts is None or len(verdicts) != n_turns:
        got = None if verdicts is None else len(verdicts)
        raise ValueError(f"per_turn rewards need one turn_verdicts entry per turn ({n_turns}), got {got}")
    return [0.0 if v is None else verdict_reward(v, cfg) for v in verdicts]


def episode_turn_rewards(traj: Trajectory, n_turns: int, cfg: RewardConfig) -> list[float]:
    """One reward per turn, by ``cfg.placement`` (research.rl.PLACEMENTS)."""
    return PLACEMENTS.get_named(cfg.placement)(traj, n_turns, cfg)


def place_rewards(response_mask, turn_ids, turn_rewards, cfg: RewardConfig):
    """Token rewards and discounts [R] (response coordinates) from one reward per turn: each turn's reward
    on its last policy token; ``turn_gamma`` as the discount there (per_turn only)."""
    m = np.asarray(response_mask, bool)
    tid = np.asarray(turn_ids)
    rewards = np.zeros(m.shape, np.float32)
    discounts = np.ones(m.shape, np.float32)
    for k, r in enumerate(turn_rewards):
        idx = np.flatnonzero(m & (tid == k))
        if idx.size == 0:
            raise ValueError(f"turn {k} has no policy token")
        rewards[idx[-1]] = r
        if cfg.placement == "per_turn":
            discounts[idx[-1]] = cfg.turn_gamma
    return rewards, discounts


class DropCounter(Counter):
    """Counts of dropped episodes by reason (``total`` included in ``as_metrics``)."""

    def as_metrics(self, prefix: str = "dropped/") -> dict[str, float]:
        out = {f"{prefix}{k}": float(v) for k, v in sorted(self.items())}
        out[f"{prefix}total"] = float(sum(self.values()))
        return out
