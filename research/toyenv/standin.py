"""A stand-in judge for developing the RL demo on CPU: verdicts from a cost model fitted to plan timings the
real judge measured on a GPU (``benchmarks.toyenv.toy_plan_speeds``), no sandbox. Never a result: every number
in ``docs/results/toy_rl_gpu.md`` comes from the sandbox on the GPU.

The model, per task of the timing file (the demo's train and test tasks):
- a kernel costs what one kernel of the measured one-kernel-per-op plan with the nearest tile cost
  (``median_ms / ops``; an elementwise kernel's nearest by elements per program ``B * V`` on a log scale,
  then warps; a row kernel's by warps, then the larger tile), whatever ops it fuses: the toy kernels are
  memory-bound, one read and one write each;
- a plan costs the sum of its kernels; its speedup over eager is the measured eager time over that;
- without the tail mask (``M0``) a plan is ``incorrect`` unless every elementwise kernel's tile divides the
  tensor and every row kernel's rows per program divide the rows and its row is a power of two (no padding
  lanes in a reduction), as the renderer's kernels behave.
The reward is CUDA Agent's tiers over eager only (the demo's training judge): -1 / 1 / 2 (more than 5%
faster than eager); ``speedups`` carry the eager ratio, so ``reward_fn="speedup"`` works unchanged.
Against the H200 timings it was fitted on (speedup predicted / measured, median over the 24 tasks): the
one-kernel-per-op plans 1.0 (0.99 for ``B1024 W4``; 1.26 for ``B32 W1``, whose row kernels it prices
as ``B128 W1``'s), the fused plans it never saw 1.11 (0.89 to 4.3: it ignores what fusing a reduction costs);
tests/toyenv/test_standin.py keeps those bounds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

from .grammar import Plan, PlanError, parse_plan
from .ops import MAP
from .render import render_plan
from .reward import INVALID_PLAN, Judgement, _same_ops
from .tasks import ToyTask

# A package asset (the H200 run of benchmarks.toyenv.toy_plan_speeds the model was fitted on), not a results
# file: the library never reads the benchmarks' output at run time.
DEFAULT_TIMINGS = Path(__file__).resolve().parent / "assets" / "toy_plan_speeds_2026-12-01_h200.json"


class StandInJudge:
    """``judge_many`` / ``invalid_reward`` like ``PlanJudge``; tasks outside the timing file raise
    ``KeyError`` naming them."""

    invalid_reward = -1.0

    def __init__(self, timings: str | Path = DEFAULT_TIMINGS):
        data = json.loads(Path(timings).read_text())
        self.eager_ms: dict[str, float] = {}
        self.tiles: dict[str, list[tuple[int, int, float]]] = {}  # task -> (elements, warps, ms per kernel)
        for row in data["rows"]:
            if row.get("status") != "correct" or not row.get("speedup_eager"):
                continue
            self.eager_ms[row["task"]] = row["median_ms"] * row["speedup_eager"]
            plan = parse_plan(row["text"])
            if all(len(k.steps) == 1 for k in plan.kernels):
                k = next((k for k in plan.kernels if k.kind == MAP), plan.kernels[0])
                elems = (k.block or 1) * (k.vec or 1)
                per = row["median_ms"] / len(plan.kernels)
                self.tiles.setdefault(row["task"], []).append((elems, k.warps, per))
        self.stats = {"judged": 0, "invalid": 0}

    def _kernel_ms(self, task_id: str, elems: int | None, warps: int) -> float:
        def dist(t):
            w = abs(math.log2(t[1]) - math.log2(warps))
            if elems is None:  # a row kernel: its warps decide
                return (w, -t[0])
            return (abs(math.log2(t[0]) - math.log2(elems)), w, -t[0])

        return min(self.tiles[task_id], key=dist)[2]

    def speedup(self, task: ToyTask, plan: Plan) -> float:
        if task.id not in self.tiles:
            raise KeyError(f"task {task.id} has no timings in the stand-in judge's file")
        ms = 0.0
        for k in plan.kernels:
            elems = k.block * k.vec if k.kind == MAP else None
            ms += self._kernel_ms(task.id, elems, k.warps)
        return self.eager_ms[task.id] / ms

    def correct(self, task: ToyTask, plan: Plan) -> bool:
        pow2 = task.cols & (task.cols - 1) == 0
        for k in plan.kernels:
            if k.mask:
                continue
            if k.kind == MAP and (task.rows * task.cols) % (k.block * k.vec):
                return False
            if k.kind != MAP and (task.rows % k.rows or not pow2):
                return False
        return True

    def judge_many(
        self, items: Iterable[tuple[ToyTask, Plan | str]], use_cache: bool = True
    ) -> list[Judgement]:
        out = []
        for task, plan in items:
            try:
                plan = plan if isinstance(plan, Plan) else parse_plan(plan)
                _same_ops(task, plan)
                render_plan(task, plan)
            except PlanError as exc:
                self.stats["invalid"] += 1
                out.append(Judgement(INVALID_PLAN, self.invalid_reward, error=str(exc)))
                continue
            self.stats["judged"] += 1
            if not self.correct(task, plan):
                out.append(Judgement("incorrect", -1.0, error="no tail mask where the tiles do not divide"))
                continue
            s = self.speedup(task, plan)
            out.append(Judgement("correct", 2.0 if s > 1.05 else 1.0, speedups={"eager": s}))
        return out
