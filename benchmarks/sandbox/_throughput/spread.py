"""The timing spread (IQR/median) of each fast-path kernel and its eager reference under the judge's
timer alone, outside the sandbox."""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable

from .common import FASTPATH, init_torch, list_tasks, load_module, log
from .problems import problem_path


def time_callable(fn: Callable, input_sets: list, iters: int, warmup: int) -> dict:
    """The sandbox's own timer (kernels_env.judge.timing: cold L2, GPU spin before start, stream/device
    clocks, rotated inputs) for exactly ``iters`` calls, in this module's stats format (milliseconds)."""
    import torch

    from kernels_env.judge.timing.timer import time_callable as judge_timer

    timing = {"warmup_iters": warmup, "min_iters": iters, "max_iters": iters, "target_time_s": 0.0}
    t = judge_timer(fn, input_sets, {**timing, "l2_flush": True}, torch.device("cuda"))
    med = t["median_ms"]
    return {
        "count": t["count"],
        "median": med,
        "q1": t["q1_ms"],
        "q3": t["q3_ms"],
        "iqr": t["iqr_ms"],
        "spread": t["iqr_ms"] / med if med else None,
        "min": t["min_ms"],
        "max": t["max_ms"],
        "mean": t["mean_ms"],
        "clock": t["clock"],
        "stabilize_iters": t.get("stabilize_iters"),  # extra samples taken while IQR/median was too wide
    }


def step_spread(args) -> dict:
    torch = init_torch()
    if not torch.cuda.is_available():
        return {"error": "no CUDA device"}
    os.environ.setdefault("KERNELS_ENV_CACHE_DIR", tempfile.mkdtemp(prefix="fastpath_spread_cache_"))
    out: dict = {
        "iters": args.iters,
        "input_sets": args.input_sets,
        "timer": "kernels_env.judge.timing",
        "tasks": {},
    }
    for task in list_tasks(args.tasks):
        rec: dict = {}
        try:
            sol = load_module(FASTPATH / f"{task}.py", f"spread_{task}")
            ref = load_module(problem_path(task), f"spread_ref_{task}")
            init = ref.get_init_inputs()
            torch.manual_seed(42)
            model = ref.Model(*init).cuda()
            torch.manual_seed(42)
            new = sol.ModelNew(*init).cuda()
            with torch.device("cuda"):
                sets = [
                    [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
                    for _ in range(args.input_sets)
                ]
            with torch.no_grad():
                rec["candidate_ms"] = time_callable(new, sets, args.iters, 5)
                rec["eager_ms"] = time_callable(model, sets, args.iters, 5)
            rec["speedup_vs_eager"] = rec["eager_ms"]["median"] / rec["candidate_ms"]["median"]
            del model, new, sets
        except BaseException as exc:
            rec["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        torch.cuda.empty_cache()
        out["tasks"][task] = rec
        c = rec.get("candidate_ms", {})
        log(
            f"  {task:24s} median {c.get('median', float('nan')):.4f} ms"
            f"  spread {100 * (c.get('spread') or 0):.2f}%"
            f"  vs eager {rec.get('speedup_vs_eager', float('nan')):.2f}x {rec.get('error', '')}"
        )
    big = [
        r["candidate_ms"] for r in out["tasks"].values() if r.get("candidate_ms", {}).get("median", 0) > 0.1
    ]
    out["summary"] = {
        # distinct candidate kernels behind the spread figure (one per task), and how many pass 100 us
        "distinct_kernels": sum(1 for r in out["tasks"].values() if "candidate_ms" in r),
        "kernels_over_100us": len(big),
        "max_spread": max((s["spread"] for s in big), default=None),
        "median_spread": statistics.median([s["spread"] for s in big]) if big else None,
    }
    return out
