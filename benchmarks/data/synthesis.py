"""Benchmark of task synthesis.

cpu: generate and CPU-filter N tasks (default 6,000, the paper's dataset size) on this machine; records wall
     time, tasks/hour, candidates, drop reasons and counts to a JSON file plus a markdown note.
         python -m benchmarks.data.synthesis cpu --num-tasks 6000 --workers 2
gpu: synthesize N tasks on the GPU machine (CPU filters), then run the GPU runtime-window filter on them and
     report tasks per hour per GPU and how the cost-model proxy compares with measured eager medians. The
     timing goes through the sandbox client (research.data.gpu_filter), exactly as in a synthesis run.
         python -m benchmarks.data.synthesis gpu --num-tasks 240 --results $OUT/data_results.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

from benchmarks._results import default_path, write_results
from kernels_env.host.environment import nvidia_smi
from research.data import SynthesisConfig, synthesize
from research.data.config import FilterConfig, GpuFilterConfig
from research.data.gpu_filter import make_timer
from research.data.records import read_jsonl

ROOT = Path(__file__).resolve().parents[2]


def environment() -> dict:
    env = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "python": platform.python_version(),
           "platform": platform.platform(), "cpus": os.cpu_count()}  # fmt: skip
    try:
        import torch

        env["torch"] = torch.__version__
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name()
            env["cuda"] = torch.version.cuda
            env["driver"] = (nvidia_smi("driver_version") or {}).get("driver_version")
    except Exception as exc:  # environment capture must never fail the benchmark
        env["torch_error"] = repr(exc)
    return env


def run_cpu(args) -> dict:
    filters = FilterConfig(decontam_dir=args.eval_dir)
    cfg = SynthesisConfig(num_tasks=args.num_tasks, out_dir=args.out_dir, seed=args.seed,
                          workers=args.workers, progress=not args.no_progress, filters=filters)  # fmt: skip
    resumed = (Path(args.out_dir) / "candidates.jsonl").exists()
    t0 = time.monotonic()
    manifest = synthesize(cfg)
    wall = time.monotonic() - t0
    result = {
        "benchmark": "synthesis_cpu",
        "environment": environment(),
        "config": dataclasses.asdict(cfg),
        "resumed": resumed,
        "wall_s": round(wall, 1),
        "tasks_per_hour": round(manifest["num_tasks"] / wall * 3600, 1) if not resumed else None,
        "num_tasks": manifest["num_tasks"],
        "candidates": manifest["candidates"],
        "drop_reasons": manifest["drop_reasons"],
        "counts": {k: v for k, v in manifest["counts"].items() if k != "ops"},
        "check_seconds": manifest["check_seconds_this_run"],
        "compile_check": manifest["compile_check"],
        "decontamination": {k: v for k, v in manifest["decontamination"].items() if k != "dropped"},
        "runtime": manifest["runtime"],
    }
    write(result, args.results)
    write_note(result, Path(args.results).with_suffix(".md"))
    return result


def write(result: dict, path: str) -> None:
    write_results(result["benchmark"], result, path, indent=1)


def write_note(r: dict, path: Path) -> None:
    drops = "\n".join(f"| {k} | {v} |" for k, v in r["drop_reasons"].items())
    e = r["environment"]
    path.write_text(f"""# Synthesis benchmark (CPU filters)

{e["date"]}, {e["cpus"]} CPU cores ({e["platform"]}), Python {e["python"]}, torch {e.get("torch")}.
Command: `python -m benchmarks.data.synthesis cpu --num-tasks {r["config"]["num_tasks"]} \
--workers {r["config"]["workers"]}`
(default filters; decontamination against `{r["config"]["filters"]["decontam_dir"]}`).

- {r["num_tasks"]} tasks kept from {r["candidates"]} candidates in {r["wall_s"] / 60:.1f} min wall
  ({r["tasks_per_hour"]} tasks/hour{", resumed run: wall covers the last part only" if r["resumed"] else ""}).
- Check CPU seconds by stage: {r["check_seconds"]}.
- torch.compile: `{r["compile_check"]["backend_all_tasks"]}` on every task; inductor on
  {r["compile_check"]["inductor_checked_this_run"]} tasks
  ({r["compile_check"]["inductor_failed_this_run"]} failed).
- Counts: ops per task {r["counts"]["num_ops"]}; levels {r["counts"]["level"]}; splits {r["counts"]["split"]};
  dtypes {r["counts"]["dtype"]}; check sizes {r["counts"]["check_mode"]}.

| drop reason | candidates |
|---|---|
{drops}

Static drops (compose, memory, runtime_proxy, duplicate, contaminated) cost no execution; the others are
execution checks in worker processes. See docs/data.md for what each reason means.
""")


def _time_all(name: str, timer, records, budget_s: float, log) -> dict:
    t0 = time.monotonic()
    rows = []
    for rec in records:
        if time.monotonic() - t0 > budget_s:
            log(f"{name}: budget of {budget_s:.0f} s used after {len(rows)} tasks")
            break
        t = time.monotonic()
        res = timer.time(rec)
        rows.append({"id": rec.id, "ok": bool(res.get("ok")), "eager_ms": res.get("eager_ms"),
                     "est_ms": rec.est_ms, "family": rec.meta.get("family"), "dtype": rec.meta.get("dtype"),
                     "category": rec.category, "seconds": round(time.monotonic() - t, 3),
                     "gpu": res.get("gpu"), "reason": None if res.get("ok") else res.get("reason"),
                     "detail": None if res.get("ok") else str(res.get("detail"))[:200]})  # fmt: skip
    wall = time.monotonic() - t0
    ok = [r for r in rows if r["ok"]]
    ratios = sorted(r["eager_ms"] / r["est_ms"] for r in ok if r["est_ms"])
    in_window = [r for r in ok if 1.0 <= r["eager_ms"] <= 100.0]
    by_family = {}
    for fam in sorted({r["family"] for r in ok}):
        rs = [r["eager_ms"] / r["est_ms"] for r in ok if r["family"] == fam and r["est_ms"]]
        by_family[fam] = {"n": len(rs), "median_measured_over_est": round(statistics.median(rs), 3)}
    q = (lambda p: round(ratios[int(p * (len(ratios) - 1))], 3)) if ratios else (lambda p: None)
    summary = {
        "timer": name,
        "timed": len(rows),
        "ok": len(ok),
        "wall_s": round(wall, 1),
        "tasks_per_hour_per_gpu": round(len(ok) / wall * 3600, 1) if wall > 0 else None,  # timed successfully
        "attempts_per_hour_per_gpu": round(len(rows) / wall * 3600, 1) if wall > 0 else None,
        "in_window_1_100ms": len(in_window),
        "measured_over_est": {"p10": q(0.1), "median": q(0.5), "p90": q(0.9)},
        "by_family": by_family,
        "failures": [r for r in rows if not r["ok"]][:20],
        "rows": rows,
    }
    log(
        f"{name}: {len(rows)} tasks in {wall:.1f} s -> {summary['tasks_per_hour_per_gpu']} tasks/h/GPU; "
        f"{len(ok)} ok, {len(in_window)} in [1, 100] ms; measured/est {summary['measured_over_est']}"
    )
    return summary


def run_gpu(args) -> dict:
    def log(msg):
        print(f"[data-bench] {msg}", flush=True)

    result = {"benchmark": "synthesis_gpu", "environment": environment(), "steps": {}}
    log(f"environment {result['environment']}")
    t0 = time.monotonic()
    filters = FilterConfig(inductor_fraction=0.0)
    cfg = SynthesisConfig(num_tasks=args.num_tasks, out_dir=args.out_dir, seed=args.seed,
                          workers=args.workers, progress=False, filters=filters)  # fmt: skip
    try:
        manifest = synthesize(cfg)
        result["steps"]["synthesize"] = {
            "ok": True,
            "wall_s": round(time.monotonic() - t0, 1),
            "num_tasks": manifest["num_tasks"],
            "candidates": manifest["candidates"],
            "drop_reasons": manifest["drop_reasons"],
        }
    except Exception as exc:
        result["steps"]["synthesize"] = {"ok": False, "error": repr(exc)}
        write(result, args.results)
        raise
    log(f"synthesized {manifest['num_tasks']} tasks in {time.monotonic() - t0:.1f} s")
    write(result, args.results)
    records = read_jsonl(Path(args.out_dir) / "tasks.jsonl")

    budget = max(args.total_budget_s - (time.monotonic() - t0) - 10.0, 10.0)
    log(f"sandbox timing budget {budget:.0f} s")
    try:
        timer = make_timer(GpuFilterConfig(timeout_s=120))
    except Exception as exc:
        result["steps"]["sandbox_timer"] = {"error": f"sandbox client failed to start: {exc!r}"}
        write(result, args.results)
        raise
    try:
        result["steps"]["sandbox_timer"] = _time_all("sandbox", timer, records, budget, log)
    finally:
        timer.close()
    write(result, args.results)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["cpu", "gpu"])
    p.add_argument("--num-tasks", type=int, default=None)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--eval-dir", default=str(ROOT / "tests/fixtures/data/kernelbench"))
    p.add_argument("--results", default=None)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--total-budget-s", type=float, default=1e9, help="gpu mode: wall budget of the whole run")
    args = p.parse_args()
    if args.mode == "cpu":
        args.num_tasks = args.num_tasks or 6000
        args.out_dir = args.out_dir or "/tmp/synthesis_bench_cpu"
        args.results = args.results or str(default_path("synthesis_cpu"))
        r = run_cpu(args)
        print(json.dumps({k: r[k] for k in ("num_tasks", "candidates", "wall_s", "drop_reasons")}))
    else:
        args.num_tasks = args.num_tasks or 240
        args.out_dir = args.out_dir or "/tmp/synthesis_bench_gpu"
        args.results = args.results or str(default_path("synthesis_gpu"))
        run_gpu(args)


if __name__ == "__main__":
    main()
