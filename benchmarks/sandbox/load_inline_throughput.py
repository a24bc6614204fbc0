"""Candidates per hour on real load_inline solution sets, with cold baselines, and where the time goes.

    python -m benchmarks.sandbox.load_inline_throughput --out li.json              # the GPU measurement
    python -m benchmarks.sandbox.load_inline_throughput --run-workers-per-gpu 2 --out li2.json  # 2 workers
    python -m benchmarks.sandbox.load_inline_throughput --smoke --out smoke.json   # CPU, 2 candidates

Candidates: the load_inline set (70 KernelBench-style problems, each with a load_inline solution whose CUDA
differs from every other's; ``load_inline_set`` generates them into the cache on first use). Everything is
cold: a fresh cache directory (torch.compile's own cache, ``TORCHINDUCTOR_CACHE_DIR``, inside it), so every
extension is built and every reference's baselines are measured in this run. All candidates are submitted at
once (``SandboxClient.submit``) to ``--compile-workers`` compile workers and the run workers:
``--run-workers-per-gpu N`` on the GPU, timing under the GPU lock (``SandboxConfig.exclusive_timing``;
``--no-exclusive-timing``: without it, timings disturbed and noted). Reported: candidates/hour (candidates /
wall time), ``sustained`` (the rate while the pipeline is full: from the end of the first wave to the start of
the last build) and ``steady_state`` (the rate from the first verdict to the last: the cold first wave of
builds left out, what a run cut by ``--budget-s`` still measures; it overestimates), verdict counts, and per
phase the median and total seconds over candidates of ``durations_s``: ``queued`` (waiting for a worker),
``compile`` (the compile stage: the load_inline build), ``run`` (correctness and timing on the device), with N
> 1 ``gpu_wait`` / ``gpu_exclusive`` (of ``run``: waiting for the GPU lock, holding it to time), ``baselines``
(time the verdict waited for its reference's baselines; they start on a run worker while the candidate
compiles). ``run_workers``: what kept the N run workers busy (candidates' run stages, baselines, their waits
for the lock) and ``busy_share`` per worker. ``host_cpu``: the share of the host's cores busy over the run and
over the steady-state window (``/proc/stat``; ``steal_share``: CPU time a shared host's hypervisor gave
others), busy core-seconds per verdict there and over the whole run, and the host's CPU model.
Then ``reuse``: the first solution again under another extension name and file name, whose compile
must be a cache hit (content-addressed builds, docs/sandbox.md). ``build_paths`` counts the builds by the CUDA
source they compiled (``headers``: ``lean``, ``as-written``, ``as-written-after-lean``; see
judge/build/lean_headers.py), by compiler flags (``path``: ``fast``, ``plain``, ``plain-after-fast``)
and by the shared PCH (``use_pch``); each candidate lists its own. GPU, versions, date and the commit are
recorded. ``--smoke``: CPU mode, 2 candidates, no timing (CUDA is compiled, not run: ``not_run``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks._results import git_commit, write_results
from benchmarks.sandbox._cpu_sampler import CpuSampler, host
from benchmarks.sandbox.load_inline_set import set_dir

PHASES = ("queued", "compile", "run", "gpu_wait", "gpu_exclusive", "baselines", "total")


def pairs(limit: int | None, root: Path | None = None) -> list[tuple[Path, Path]]:
    """(problem, solution) of the load_inline set, generated into the cache (or ``root``) on first use."""
    directory = set_dir(root)
    solutions = sorted((directory / "solutions").glob("*.py"))[:limit]
    return [(directory / "problems" / s.name, s) for s in solutions]


def renamed(solution: Path) -> str:
    """The same solution under another extension name (and, by ``solution_name``, another file name)."""
    return re.sub(r'name="(\w+)"', r'name="\1_renamed_copy"', solution.read_text(), count=1)


def judge_config(args):
    from kernels_env.rules.config import JudgeConfig

    baselines = [] if args.smoke else args.baselines.split(",")
    return JudgeConfig(time_candidate=not args.smoke, baselines=baselines or ["eager"])


def sandbox_config(args, cache_dir: str):
    from kernels_env.rules.config import SandboxConfig

    return SandboxConfig(
        device="cpu" if args.smoke else args.device,
        cache_dir=cache_dir,
        num_compile_workers=min(args.compile_workers, 2) if args.smoke else args.compile_workers,
        compile_timeout_s=args.compile_timeout,
        run_timeout_s=300,
        startup_timeout_s=300,
        run_workers_per_gpu=args.run_workers_per_gpu,
        exclusive_timing=not args.no_exclusive_timing,
    )


def measure(args, stop: threading.Event | None = None) -> dict:
    """Submit every candidate, collect verdicts as they land; ``stop`` (a signal) or ``--budget-s`` ends the
    collection early: the report then covers the verdicts that finished (``truncated``) and skips the reuse
    check."""
    from kernels_env.client import SandboxClient

    stop = stop or threading.Event()
    work = pairs(2 if args.smoke else args.limit)
    cache_dir = tempfile.mkdtemp(prefix="kernels_env_li_cache-")  # cold builds and cold baselines
    # torch.compile's cache is shared and persistent by default: a second run (another N) would find the
    # first one's compiled baselines there. Cold in this run's cache directory instead (workers inherit it).
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "torchinductor")
    judge = judge_config(args)
    done: list[dict] = []
    arrived: dict[str, float] = {}  # solution -> seconds from the first submission to its verdict
    reuse, env, wall, baseline_s, baseline_wait, stopped_by, lock = None, {}, 0.0, [], [], None, False
    cpu = CpuSampler()  # the host's CPU use from the first submission on
    try:
        with SandboxClient(sandbox_config(args, cache_dir)) as sb:
            sb.start()  # worker start-up is not candidate time
            started = cpu.start().t0  # the sampler's windows: seconds from the first submission, like arrived
            deadline = started + args.budget_s if args.budget_s else None
            futures = {sb.submit(p, s, judge): s.name for p, s in work}
            pending = set(futures)
            while pending and not stop.is_set():
                if deadline is not None and time.perf_counter() >= deadline:
                    stopped_by = "budget"
                    break
                finished, pending = concurrent.futures.wait(
                    pending, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for fut in finished:
                    r = fut.result()
                    done.append(r)
                    arrived[futures[fut]] = round(time.perf_counter() - started, 3)
                    d = r["durations_s"]
                    # One line per verdict as it arrives: a run cut by its time limit still says what it had
                    # done (the GPU run of 2026-12-01 15:27 was killed at 250 s with nothing printed).
                    print(
                        f"[li] {len(done)}/{len(futures)} {time.perf_counter() - started:.1f} s "
                        f"{futures[fut]}: {r['status']} compile {d.get('compile')} run {d.get('run')}",
                        file=sys.stderr,
                        flush=True,
                    )
            stopped_by = stopped_by or ("signal" if stop.is_set() else None)
            wall = time.perf_counter() - started
            baseline_s, baseline_wait = sb.baseline_seconds(), sb.baseline_gpu_wait()
            env, lock = sb.environment, sb._fleet.timing_lock
            if stopped_by is None:
                problem, solution = work[0]
                reuse = sb.evaluate(
                    problem, renamed(solution), judge, solution_name=f"copy_of_{solution.name}"
                )
    finally:
        cpu.stop()
        shutil.rmtree(cache_dir, ignore_errors=True)
    order = {s.name: i for i, (_, s) in enumerate(work)}
    done.sort(key=lambda r: order.get(r.get("solution"), len(order)))
    report = summarise(done, wall, reuse, env, args, baseline_s, baseline_wait, arrived)
    report["sustained"] = sustained(report["per_candidate"], report["compile_workers"])
    report["host_cpu"] = host_cpu(cpu, report["steady_state"], len(done))
    report.update(submitted=len(work), truncated=stopped_by is not None, stopped_by=stopped_by)
    report["timing_lock"] = lock  # the run workers timed under the GPU lock
    return report


def phase_stats(results: list[dict]) -> dict[str, dict]:
    out = {}
    for phase in PHASES:
        values = [r["durations_s"].get(phase) for r in results]
        values = [v for v in values if isinstance(v, int | float)]
        out[phase] = {
            "median_s": round(statistics.median(values), 3) if values else None,
            "total_s": round(sum(values), 2),
            "count": len(values),
        }
    return out


def occupancy(
    results: list[dict],
    wall: float,
    baseline_s: list[float],
    run_workers: int,
    baseline_wait: list[float] = (),
) -> dict:
    """What kept the run workers busy: candidates' run stages and the references' baselines, as seconds and
    as a share of the wall time per worker (near 1.0: the run workers were the bottleneck). Under the GPU
    lock part of that is waiting for it (``gpu_wait_s``: candidates' and baselines'): busy, not working."""
    run = sum(r["durations_s"].get("run") or 0.0 for r in results)
    waits = sum(r["durations_s"].get("gpu_wait") or 0.0 for r in results) + sum(baseline_wait)
    busy = run + sum(baseline_s)
    return {
        "workers": run_workers,
        "candidate_run_s": round(run, 2),
        "baselines_s": round(sum(baseline_s), 2),
        "baselines_measured": len(baseline_s),
        "baseline_median_s": round(statistics.median(baseline_s), 3) if baseline_s else None,
        "gpu_wait_s": round(waits, 2),
        "busy_share": round(busy / (wall * run_workers), 3) if wall > 0 else None,
    }


def sustained(per_candidate: list[dict], workers: int) -> dict:
    """Verdicts per hour while the pipeline is full: from the verdict that ends the first wave (the
    ``workers``-th, the shared PCH built meanwhile) to the moment the last candidate's build starts (from then
    on the queue is empty and the pipeline drains). ``steady_state`` runs to the last verdict instead, and so
    credits the window with the drained work of builds that started before it: an overestimate."""
    times = sorted(c["arrived_s"] for c in per_candidate if c.get("arrived_s") is not None)
    starts = [
        c["arrived_s"] - c["total"] + c["queued"]
        for c in per_candidate
        if all(isinstance(c.get(k), int | float) for k in ("arrived_s", "total", "queued"))
    ]
    if len(times) <= workers or not starts:
        return {"from_s": None, "to_s": None, "verdicts": 0, "per_hour": None}
    t1, t2 = times[workers - 1], max(starts)
    n = sum(1 for t in times if t1 < t <= t2)
    return {
        "from_s": t1,
        "to_s": round(t2, 3),
        "verdicts": n,
        "per_hour": round(n / (t2 - t1) * 3600, 1) if t2 > t1 and n else None,
    }


def host_cpu(cpu: CpuSampler, steady: dict, verdicts: int | None = None) -> dict:
    """The host's CPU use over the run and over the steady-state window, busy core-seconds per verdict there
    and (``run_core_s_per_verdict``) over the whole run, and the host's CPU model: with ``busy_share`` near
    1.0 the host's cores set the rate (more workers cannot raise it). The steady-state figure leaves out the
    first wave's builds, which finish inside it: the whole run's is the cost of a verdict."""
    window, run = cpu.summary(steady.get("first_verdict_s"), steady.get("last_verdict_s")), cpu.summary()
    after_first = steady.get("verdicts_after_first")
    per = round(window["busy_core_s"] / after_first, 1) if window and after_first else None
    per_run = round(run["busy_core_s"] / verdicts, 1) if run and verdicts else None
    return {
        "run": run,
        "steady_state": window,
        "core_s_per_verdict": per,
        "run_core_s_per_verdict": per_run,
        "host": host(),
    }


def steady_state(arrived: dict[str, float]) -> dict:
    """Verdicts per hour from the first verdict to the last: the rate once the pipeline is full (the cold
    first wave of builds and the shared PCH left out)."""
    times = sorted(arrived.values())
    if len(times) < 2 or times[-1] <= times[0]:
        return {"first_verdict_s": times[0] if times else None, "per_hour": None}
    span = times[-1] - times[0]
    return {
        "first_verdict_s": times[0],
        "last_verdict_s": times[-1],
        "verdicts_after_first": len(times) - 1,
        "per_hour": round((len(times) - 1) / span * 3600, 1),
    }


def summarise(
    results: list[dict],
    wall: float,
    reuse: dict | None,
    env: dict,
    args,
    baseline_s: list[float] = (),
    baseline_wait: list[float] = (),
    arrived: dict[str, float] | None = None,
) -> dict:
    import torch

    statuses: dict[str, int] = {}
    for r in results:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {
        "benchmark": "load_inline_throughput",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "smoke": args.smoke,
        "device": env.get("device"),
        "gpu": env.get("gpu"),
        "versions": {k: env.get(k) for k in ("driver", "cuda_runtime", "torch", "triton", "python")},
        "torch": torch.__version__,
        "compile_workers": sandbox_config(args, "").num_compile_workers,
        "run_workers_per_gpu": args.run_workers_per_gpu,
        "exclusive_timing": not args.no_exclusive_timing,
        "candidates": len(results),
        "wall_s": round(wall, 2),
        "candidates_per_hour": round(len(results) / wall * 3600, 1) if wall > 0 else None,
        "steady_state": steady_state(arrived or {}),
        "statuses": statuses,
        "phases": phase_stats(results),
        "build_paths": build_paths(results),
        "run_workers": occupancy(results, wall, list(baseline_s), _run_workers(args), list(baseline_wait)),
        "per_candidate": [
            {
                "solution": r["solution"],
                "status": r["status"],
                "error": (r.get("error") or "")[:200],
                **{p: r["durations_s"].get(p) for p in PHASES},
                "arrived_s": (arrived or {}).get(r["solution"]),
                "builds": _builds(r),
            }
            for r in results
        ],  # fmt: skip
        "reuse": None
        if reuse is None
        else {
            "status": reuse["status"],
            "error": reuse.get("error"),
            "messages": [m.get("text", "")[:1500] for m in reuse.get("messages") or []][:4],
            "compile_s": reuse["durations_s"].get("compile"),
            "first_compile_s": results[0]["durations_s"].get("compile"),
        },
    }


def _run_workers(args) -> int:
    """Run workers in the run: N on the one GPU (CPU mode: on the CPU)."""
    return max(1, args.run_workers_per_gpu)


def _builds(result: dict) -> list[dict]:
    """Per extension build: its CUDA source (lean / as-written / as-written-after-lean), its flags (fast /
    plain / plain-after-fast), shared PCH or not, whether it built, wall seconds."""
    builds = result["durations_s"].get("builds") or []
    return [{k: b.get(k) for k in ("headers", "path", "use_pch", "ok", "s")} for b in builds]


def build_paths(results: list[dict]) -> dict[str, dict[str, int]]:
    """How many builds (over every candidate) took each path: by ``headers``, ``path`` and ``use_pch``."""
    counts: dict[str, dict[str, int]] = {"headers": {}, "path": {}, "use_pch": {}}
    for result in results:
        for b in _builds(result):
            for field, seen in counts.items():
                value = str(b.get(field)).lower()
                seen[value] = seen.get(value, 0) + 1
    return counts


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="CPU mode, 2 candidates, no timing")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--limit", type=int, default=None, help="first N solutions only")
    p.add_argument("--compile-workers", type=int, default=12)
    p.add_argument("--compile-timeout", type=float, default=900.0)
    p.add_argument("--baselines", default="eager,compile")
    p.add_argument(
        "--run-workers-per-gpu",
        type=int,
        default=1,
        help="run workers sharing the GPU; they time under the GPU lock (SandboxConfig.run_workers_per_gpu)",
    )
    p.add_argument(
        "--no-exclusive-timing",
        action="store_true",
        help="with N > 1: no GPU lock (timings disturbed and noted; SandboxConfig.exclusive_timing)",
    )
    p.add_argument(
        "--budget-s", type=float, default=None, help="stop collecting after this many s (a truncated report)"
    )
    p.add_argument("--out", type=Path, default=None, help="results JSON (default: runs/benchmarks/)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    stop = threading.Event()
    # SIGTERM (an outer timeout) ends the collection: the report of the verdicts that landed is still written.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    result = measure(args, stop)
    write_results("load_inline_throughput", result, args.out)
    print(json.dumps(result, indent=2))
    if result["truncated"]:
        return 3
    expected = {"not_run"} if args.smoke else {"correct"}
    reuse = result["reuse"] or {}
    return 0 if set(result["statuses"]) <= expected and reuse.get("status") in expected else 1


if __name__ == "__main__":
    sys.exit(main())
