"""The pretraining corpus (plans that are correct but unoptimised) and the optimisations it leaves out.

A corpus plan runs one kernel per op with the tail mask, vector width 1, one row per row program and one
*tile* for the whole plan, ``(block, warps)`` drawn from ``CorpusConfig.tiles`` (blocks <= 1024, warps <= 4):
naive code picks one ``BLOCK`` and ``num_warps`` and uses them throughout a file. The tiles are drawn with
weights whose mode is the naive (32 elements, 1 warp): the pretrained policy's greedy plans are slow, while
the better tiles it has seen keep enough probability for RL's exploration to find them.

Why these choices (docs/results/toy_rl_gpu.md, toy_plan_speeds.md: the grid of plans judged on an
H200 with the training judge): one kernel per op at ``B32 W1`` runs at 0.15x eager, ``B256 W2`` 0.97x,
``B1024 W4`` 1.17x (beats eager on 67% of tasks), fused plans 2.4x (92%). With uniform tiles the pretrained
plans already beat eager on 75-88% of held-out tasks (nothing for the reward to pay for); with tiles drawn
per kernel, slow-weighted, a plan whose every kernel is well tiled had a probability of about 1% (a product
over kernels and over block and warps), so RL's batches held almost no faster plan to learn from
(2-3 of 32). Drawn per plan, a good tile is one choice the policy makes once and then copies.
``OPTIMISATIONS`` lists what corpus plans never do; ``optimisations(plan)`` says which of them a plan uses,
``optimisation_shares`` their share over plans.
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
    """Unoptimised plans: one kernel per op, one ``(block, warps)`` tile per plan drawn from ``tiles`` (by a
    hash, with ``tile_weights``; empty weights: uniform). Row kernels take the tile's warps."""

    plans_per_task: int = 4
    tiles: list[list[int]] = field(
        default_factory=lambda: [[32, 1], [64, 1], [128, 2], [256, 2], [512, 4], [1024, 4]]
    )
    tile_weights: list[float] = field(default_factory=lambda: [0.36, 0.14, 0.12, 0.1, 0.12, 0.16])
    seed: int = 0

    def __post_init__(self) -> None:
        shape = [t for t in self.tiles if not (isinstance(t, (list, tuple)) and len(t) == 2)]
        if shape or not self.tiles:
            raise ValueError(f"corpus tiles are [block, warps] pairs, got {shape or 'none'}")
        bad = [list(t) for t in self.tiles if t[0] > 1024 or t[1] > DEFAULT_WARPS]
        if bad:
            raise ValueError(f"corpus tiles must stay unoptimised (blocks <= 1024, warps <= 4), got {bad}")
        w = self.tile_weights
        if w and (len(w) != len(self.tiles) or min(w) < 0 or sum(w) <= 0):
            raise ValueError(
                f"corpus tile_weights must be one non-negative weight per tile ({len(self.tiles)}), got {w}"
            )


def _draw(options: list, weights: list[float], *key):
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
    """One kernel per op, in the task's order, one tile for all: correct and unoptimised (``copy`` varies
    the tile)."""
    cfg = cfg or CorpusConfig()
    block, warps = _draw(cfg.tiles, cfg.tile_weights, cfg.seed, task.id, copy, "tile")
    return one_kernel_per_op(task, int(block), int(warps))


def one_kernel_per_op(task: ToyTask, block: int, warps: int, vec: int = 1) -> Plan:
    """One kernel per op in the task's order, every kernel with the same tile: elementwise kernels
    ``[block, vec]``, row kernels one row per program; ``warps`` for all."""
    kernels = []
    for name in task.ops:
        step = Step(name)
        tile = dict(block=block, vec=vec) if step.kind == MAP else dict(rows=1)
        kernels.append(Kernel.make([step], warps=warps, **tile))
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
