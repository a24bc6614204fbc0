"""Rewards by name: a function of the verdict status and the speedups over each baseline.

Every reward maps the statuses without a verdict on the candidate (``statuses.NO_VERDICT``: ``not_run``, CPU
mode, compiled but not executed; ``judge_error``; ``reference_error``; what the machine cannot judge;
``infra_error``, the sandbox not reached) to ``None``, and every other status but ``correct`` (the
candidate's failures, ``no_solution`` included) to its failure value. Speedups are
``t_baseline / t_candidate``; a missing speedup (CPU mode, failed baseline) never counts as faster.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ._registry import Registry
from .statuses import CORRECT, NO_VERDICT

RewardFn = Callable[[str, Mapping[str, float | None]], float | None]
REWARDS: Registry[RewardFn] = Registry("reward")


def register_reward(name: str) -> Callable[[RewardFn], RewardFn]:
    return lambda fn: REWARDS.register(name, fn)


def get_reward(name: str) -> RewardFn:
    return REWARDS.get_named(name)


def faster(speedup: float | None, margin: float = 0.05) -> bool:
    """CUDA Agent's "faster by more than 5%": (t0 - t) / t0 > margin, with speedup = t0 / t."""
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return False
    return 1.0 - 1.0 / speedup > margin


@register_reward("cuda_agent")
def cuda_agent(status: str, speedups: Mapping[str, float | None]) -> float | None:
    """-1 fail; 1 correct; 2 >5% faster than eager; 3 >5% faster than eager and torch.compile (default)."""
    if status in NO_VERDICT:
        return None
    if status != CORRECT:
        return -1.0
    if faster(speedups.get("eager")):
        return 3.0 if faster(speedups.get("compile")) else 2.0
    return 1.0


@register_reward("binary")
def binary(status: str, speedups: Mapping[str, float | None]) -> float | None:
    """1 correct, 0 otherwise."""
    return None if status in NO_VERDICT else float(status == CORRECT)


@register_reward("speedup")
def speedup(status: str, speedups: Mapping[str, float | None]) -> float | None:
    """Raw speedup over eager when correct (1 when unknown), 0 on failure (the paper's ablation)."""
    if status in NO_VERDICT:
        return None
    if status != CORRECT:
        return 0.0
    s = speedups.get("eager")
    return float(s) if s is not None and math.isfinite(s) and s > 0 else 1.0


@register_reward("log_speedup")
def log_speedup(status: str, speedups: Mapping[str, float | None]) -> float | None:
    """max(ln(speedup over eager), -1) when correct (0 when unknown), -2 on failure.

    The floor keeps every correct solution above every failure, however slow it is.
    """
    if status in NO_VERDICT:
        return None
    if status != CORRECT:
        return -2.0
    s = speedups.get("eager")
    return max(math.log(s), -1.0) if s is not None and math.isfinite(s) and s > 0 else 0.0
