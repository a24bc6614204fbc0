"""What the toy environment's plan settings are worth on this GPU: a grid of plans per task, judged by the
sandbox with the RL training judge, speedups over eager (issue 14's learning demo).

For the demo's training and test tasks (``research.rl.pipeline.demo.demo_pipeline``), every plan of a small
grid: one kernel per op with one setting for every kernel (``B<n> W<n>``; row kernels take the warps, one
row per program), the same with vector width 4, and the ops fused into as few kernels as the renderer allows
(elementwise ops share the kernel of their neighbours; two row/reduce ops never share one). It tells
where the reward pays: which of the pretraining corpus's settings lose to eager and what fusion buys.

    python -m benchmarks.toyenv.toy_plan_speeds      # GPU (runs/benchmarks/toy_plan_speeds.json)
    python -m benchmarks.toyenv.toy_plan_speeds --smoke --out /tmp/tps.json  # CPU: grid + render only
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time
from pathlib import Path

from benchmarks._results import default_path, env_info, write_results
from research.toyenv import Kernel, Plan, PlanError, RenderError, Step, render_plan
from research.toyenv.corpus import one_kernel_per_op
from research.toyenv.ops import MAP

ROOT = Path(__file__).resolve().parents[2]

UNFUSED = [(32, 1), (128, 1), (256, 2), (1024, 4), (4096, 8)]  # (block, warps) for every kernel


def fused(task, block: int = 1024, warps: int = 4) -> Plan:
    """Consecutive ops share a kernel unless both kernels would hold a row/reduce op (a row kernel applies
    its elementwise ops to its row tile)."""
    groups: list[list[Step]] = []
    for op in task.ops:
        step = Step(op)
        if groups and not (step.kind != MAP and any(s.kind != MAP for s in groups[-1])):
            groups[-1].append(step)
        else:
            groups.append([step])
    ks = []
    for g in groups:
        row = any(s.kind != MAP for s in g)
        ks.append(Kernel.make(g, warps=warps, **(dict(rows=1) if row else dict(block=block))))
    return Plan(tuple(ks))


def grid(task) -> dict[str, Plan]:
    plans = {f"unfused_B{b}_W{w}": one_kernel_per_op(task, b, w) for b, w in UNFUSED}
    plans["unfused_B1024_W4_V4"] = one_kernel_per_op(task, 1024, 4, vec=4)
    plans["fused_B1024_W4"] = fused(task)
    plans["fused_B4096_W8"] = fused(task, 4096, 8)
    out = {}
    for name, plan in plans.items():
        try:
            render_plan(task, plan)
            out[name] = plan
        except (PlanError, RenderError):
            continue  # e.g. a fusion the renderer does not take: not judged
    return out


def plot(res: dict, path: Path) -> None:
    """Per plan: the speedup over eager of every task (dots) and the share that beats eager by 5% (bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(res["summary"], key=lambda n: res["summary"][n]["median_speedup"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4))
    for i, name in enumerate(names):
        ys = [r["speedup_eager"] for r in res["rows"] if r["plan"] == name and r["speedup_eager"]]
        a.scatter([i] * len(ys), ys, s=10, alpha=0.6)
    a.axhline(1 / 0.95, color="k", lw=0.8, ls="--")
    a.set_yscale("log")
    a.set_title(f"speedup over eager per task ({res['env'].get('gpu')}, training judge)")
    b.bar(range(len(names)), [res["summary"][n]["faster_than_eager_5pct"] for n in names])
    b.set_title("share of tasks faster than eager by > 5%")
    for ax in (a, b):
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="the results JSON (default: runs/benchmarks/)")
    ap.add_argument("--smoke", action="store_true", help="CPU: build and render the grid, judge nothing")
    ap.add_argument("--splits", default="train,test")
    ap.add_argument("--png", type=Path, help="also plot the results here")
    ap.add_argument("--replot", type=Path, help="plot an earlier run's JSON (with --png) and stop")
    args = ap.parse_args(argv)
    if args.replot:
        res = json.loads(args.replot.read_text())
        plot(res, args.png or args.replot.with_suffix(".png"))
        return res
    args.out = args.out or default_path("toy_plan_speeds")
    from research.rl.pipeline.demo import demo_pipeline
    from research.toyenv import make_tasks

    cfg = demo_pipeline("/tmp/unused", "/tmp/unused.jsonl")
    t0 = time.perf_counter()
    tasks = [t for t in make_tasks(cfg.tasks).tasks if t.split in args.splits.split(",")]
    items = [(t, name, plan) for t in tasks for name, plan in grid(t).items()]
    res: dict = {"benchmark": "toy_plan_speeds", "env": env_info(), "judge": None, "tasks": len(tasks),
                 "plans": len(items), "rows": []}
    print(f"[toy_plan_speeds] {len(tasks)} tasks, {len(items)} plans", flush=True)
    if not args.smoke:
        import dataclasses

        from kernels_env.client import SandboxClient
        from research.toyenv import PlanJudge

        res["judge"] = dataclasses.asdict(cfg.judge)
        with SandboxClient(cfg.sandbox, cfg.judge) as sb:
            judge = PlanJudge(sb, cfg.judge)
            verdicts = judge.judge_many([(t, p) for t, _, p in items], use_cache=False)
    else:
        verdicts = [None] * len(items)
    for (t, name, plan), v in zip(items, verdicts):
        res["rows"].append({"task": t.id, "split": t.split, "ops": list(t.ops), "rows": t.rows,
                            "cols": t.cols, "plan": name, "text": plan.text(), "status": v and v.status,
                            "speedup_eager": v and v.speedups.get("eager"), "median_ms": v and v.median_ms})
    by = collections.defaultdict(list)
    for r in res["rows"]:
        if r["status"] == "correct" and r["speedup_eager"]:
            by[r["plan"]].append(r["speedup_eager"])
    res["summary"] = {name: {"n": len(s), "median_speedup": statistics.median(s),
                             "faster_than_eager_5pct": sum(x > 1 / 0.95 for x in s) / len(s)}
                      for name, s in sorted(by.items())}
    res["wall_s"] = time.perf_counter() - t0
    write_results("toy_plan_speeds", res, args.out)
    if args.png and res["summary"]:
        plot(res, args.png)
    for name, s in res["summary"].items():
        print(f"  {name:24s} n={s['n']:3d} median x{s['median_speedup']:.2f} "
              f"beats eager {100 * s['faster_than_eager_5pct']:.0f}%", flush=True)
    return res


if __name__ == "__main__":
    main()
