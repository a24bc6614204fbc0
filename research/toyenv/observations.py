"""The toy environment's vocabulary: the plan tokenizer's 69 tokens plus verdict-observation tokens.

An observation after a judged plan is ``<obs> <status> <eager bucket> <compile bucket> <sep>``: the status of
the verdict and the speedup over each baseline in a few buckets (``na`` when not timed: CPU mode, a failed
plan). It ends with ``<sep>``, the token that ends a task prompt, so the next policy tokens are a plan
again. The new tokens are appended after the plan vocabulary ``VOCAB`` (its ids never change), so a model
pretrained on the plan vocabulary keeps its meaning for every earlier id.
"""

from __future__ import annotations

from .tokenizer import VOCAB, PlanTokenizer

OBS = "<obs>"
STATUSES = ("correct", "incorrect", "rejected", "compile_error", "runtime_error", "invalid_plan", "other")
# Speedup buckets (t_baseline / t_plan): upper bounds, exclusive; the last is open.
SPEED_EDGES = (0.5, 0.95, 1.05, 1.5, 2.0)
SPEED_NAMES = ("lt0.5", "lt0.95", "par", "lt1.5", "lt2", "ge2")
BASELINES = ("eager", "compile")

OBS_TOKENS: tuple[str, ...] = (
    OBS,
    *(f"st_{s}" for s in STATUSES),
    *(f"{b[0]}_{n}" for b in BASELINES for n in (*SPEED_NAMES, "na")),
)
TOY_VOCAB: tuple[str, ...] = (*VOCAB, *OBS_TOKENS)


def toy_tokenizer() -> PlanTokenizer:
    """The rollout tokenizer: plan vocabulary + observation tokens (``len == 69 + 1 + 7 + 14``)."""
    return PlanTokenizer(vocab=TOY_VOCAB)


def speed_bucket(speedup: float | None) -> str:
    if speedup is None or not speedup > 0:
        return "na"
    for edge, name in zip(SPEED_EDGES, SPEED_NAMES):
        if speedup < edge:
            return name
    return SPEED_NAMES[-1]


def observation_tokens(status: str, speedups: dict[str, float | None] | None) -> list[str]:
    """The observation of one verdict (see the module doc); speedups only for a correct plan."""
    speedups = speedups or {}
    st = status if status in STATUSES else "other"
    correct = status == "correct"
    buckets = [f"{b[0]}_{speed_bucket(speedups.get(b) if correct else None)}" for b in BASELINES]
    return [OBS, f"st_{st}", *buckets, "<sep>"]
