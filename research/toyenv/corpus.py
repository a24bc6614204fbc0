"""The pretraining corpus (plans that are correct but unoptimised) and the optimisations it leaves out.

A corpus plan runs one kernel per op with the tail mask, at most 4 warps, vector width 1, one row per row
program and an elementwise block drawn from ``CorpusConfig.blocks`` (<= 1024): correct on every size, slow
on a GPU (every op reads and writes the whole tensor). Blocks and warps are drawn with weights that favour
small tiles and one warp, as naive code does (one thread per element, little memory in flight): the
pretrained policy's most likely settings are slow, while the better ones it has seen keep some
probability, which is what RL's exploration starts from (benchmarks/results/toy_rl_gpu.md: with tiles of
256-1024 elements and 2-4 warps the pretrained plans already beat eager on 75-88% of held-out tasks, which
left the reward nothing to pay for). ``OPTIMISATIONS`` lists what such plans never do;
``optimisations(plan)`` says which of them a plan uses, ``optimisation_shares`` their share over plans.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from research.data.ops import Reject

from .grammar import DEFAULT_WARPS, Kernel, Plan, Step
from .ops import MAP
from .tasks import HELDOUT, ToyTask, ToyTaskConfig, make_task


@dataclass(frozen=True)
class Optimisation:
    name: str
    description: str
    used: Callable[[Kernel], bool]


_OPTS = (
    Optimisation("fusion", "a kernel runs two or more ops", lambda k: len(k.steps) > 1),
    Optimisation("vector_width", "elementwise tiles of [B, V > 1]", lambda k: (k.vec or 1) > 1),
    Optimisation("large_block", "a tile of B > 1024 rows", lambda k: (k.block or 0) > 1024),
    Optimisation("multi_row", "a row kernel program handles R > 1 rows", lambda k: (k.rows or 1) > 1),
    Optimisation("many_warps", "more than 4 warps per program", lambda k: k.warps > DEFAULT_WARPS),
    Optimisation("no_tail_mask", "no tail handling (right only where tiles divide)", lambda k: not k.mask),
)
OPTIMISATIONS: dict[str, Optimisation] = {o.name: o for o in _OPTS}


def optimisations(plan: Plan) -> frozenset[str]:
    """The names of ``OPTIMISATIONS`` a plan uses."""
    return frozenset(n for n, o in OPTIMISATIONS.items() if any(o.used(k) for k in plan.kernels))


def optimisation_shares(plans: Iterable[Plan]) -> dict[str, float]:
    """Share of plans using each optimisation (and ``any``: at least one of them)."""
    plans = list(plans)
    if not plans:
        return {**{n: 0.0 for n in OPTIMISATIONS}, "any": 0.0}
    used = [optimisations(p) for p in plans]
    out = {n: sum(n in u for u in used) / len(plans) for n in OPTIMISATIONS}
    out["any"] = sum(bool(u) for u in used) / len(plans)
    return out


@dataclass
class CorpusConfig:
    """Unoptimised plans: one kernel per op, settings drawn per kernel from these sets (by a hash, with the
    given weights; empty weights: uniform)."""

    plans_per_task: int = 4
    blocks: list[int] = field(default_factory=lambda: [32, 64, 128, 256, 512, 1024])
    block_weights: list[float] = field(default_factory=lambda: [0.35, 0.25, 0.15, 0.1, 0.08, 0.07])
    warps: list[int] = field(default_factory=lambda: [1, 2, 4])
    warp_weights: list[float] = field(default_factory=lambda: [0.5, 0.3, 0.2])
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [b for b in self.blocks if b > 1024] + [w for w in self.warps if w > DEFAULT_WARPS]
        if bad or not self.blocks or not self.warps:
            raise ValueError(
                f"corpus settings must stay unoptimised (blocks <= 1024, warps <= 4), got {bad or 'empty'}"
            )
        for name, opts, weights in (
            ("block", self.blocks, self.block_weights),
            ("warp", self.warps, self.warp_weights),
        ):
            if weights and (len(weights) != len(opts) or min(weights) < 0 or sum(weights) <= 0):
                raise ValueError(
                    f"corpus {name}_weights must be one non-negative weight per option "
                    f"({len(opts)}), got {weights}"
                )


def _draw(options: list[int], weights: list[float], *key) -> int:
    """One option, chosen by a hash of ``key`` with probability proportional to its weight."""
    u = int(hashlib.sha256(repr(key).encode()).hexdigest()[:13], 16) / 16**13
    weights = weights or [1.0] * len(options)
    acc, total = 0.0, sum(weights)
    for option, w in zip(options, weights):
        acc += w / total
        if u < acc:
            return option
    return options[-1]


def baseline_plan(task: ToyTask, copy: int = 0, cfg: CorpusConfig | None = None) -> Plan:
    """One kernel per op, in the task's order: correct and unoptimised (``copy`` varies the settings)."""
    cfg = cfg or CorpusConfig()
    kernels = []
    for i, name in enumerate(task.ops):
        warps = _draw(cfg.warps, cfg.warp_weights, cfg.seed, task.id, copy, i, "w")
        step = Step(name)
        if step.kind == MAP:
            block = _draw(cfg.blocks, cfg.block_weights, cfg.seed, task.id, copy, i, "b")
            kernels.append(Kernel.make([step], block=block, warps=warps))
        else:
            kernels.append(Kernel.make([step], rows=1, warps=warps))
    return Plan(tuple(kernels))


def corpus_plans(tasks: Iterable[ToyTask], cfg: CorpusConfig | None = None) -> list[tuple[ToyTask, Plan]]:
    """``plans_per_task`` distinct unoptimised plans per task (fewer where the settings allow fewer)."""
    cfg = cfg or CorpusConfig()
    out = []
    for task in tasks:
        seen = set()
        for copy in range(cfg.plans_per_task * 4):
            plan = baseline_plan(task, copy, cfg)
            if plan not in seen:
                seen.add(plan)
                out.append((task, plan))
            if len(seen) == cfg.plans_per_task:
                break
    return out


def corpus_tasks(
    task_cfg: ToyTaskConfig,
    num_tasks: int,
    avoid: Iterable[ToyTask] = (),
    include_heldout_category: bool = True,
) -> list[ToyTask]:
    """Tasks for the pretraining corpus: their own candidate stream (seed + 1000), no chain signature of
    ``avoid`` (pass the held-out tasks of the RL set). With ``include_heldout_category`` the corpus also
    teaches the held-out category's ops, unoptimised: the stand-in base model knows every operator, as a
    pretrained LLM would; only their optimisation is never trained."""
    cfg = dataclasses.replace(task_cfg, seed=task_cfg.seed + 1000)
    taken = {t.signature for t in avoid}
    counts = sorted(cfg.op_count_weights)
    out: list[ToyTask] = []
    j = 0
    while len(out) < num_tasks:
        j += 1
        if j > cfg.max_candidates:
            raise RuntimeError(f"{cfg.max_candidates} candidates gave only {len(out)} corpus tasks")
        try:
            task = make_task(cfg, counts[j % len(counts)], j)
        except Reject:
            continue
        if task.signature in taken or (not include_heldout_category and task.split == HELDOUT):
            continue
        taken.add(task.signature)
        out.append(dataclasses.replace(task, split="corpus"))
    return out
