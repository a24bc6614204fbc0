"""End to end through ``kernels_env.client.SandboxClient``: warm-up evaluations build the baselines, then
fresh candidates (a new cache key each, so each is compiled) one at a time and, optionally, several in
flight; candidates per hour count only real verdicts."""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .common import FASTPATH, TARGETS, list_tasks, log, stats, write_json
from .problems import problem_path


def _as_dict(result) -> dict:
    if isinstance(result, dict):
        return result
    for attr in ("to_dict", "model_dump", "_asdict"):
        if hasattr(result, attr):
            return getattr(result, attr)()
    return dict(vars(result))


def _unit_ms(key: str) -> float:
    key = key.lower()
    if key.endswith("_us") or "(us)" in key:
        return 1e-3
    if key.endswith("_s") and not key.endswith("_ms"):
        return 1e3
    return 1.0  # the KernelBench convention: milliseconds


def find_spreads(timings, path: str = "timings") -> list[dict]:
    """Every (median, IQR) pair reported anywhere in a sandbox result's timings, with spread and median_ms."""
    found = []
    if isinstance(timings, dict):
        keys = {k.lower(): k for k in timings if isinstance(k, str)}
        med = next(
            (keys[k] for k in keys if "median" in k and isinstance(timings[keys[k]], int | float)), None
        )
        iqr = next((keys[k] for k in keys if "iqr" in k and isinstance(timings[keys[k]], int | float)), None)
        if med is not None and iqr is not None and timings[med]:
            found.append(
                {
                    "where": path,
                    "median_ms": timings[med] * _unit_ms(med),
                    "spread": timings[iqr] / timings[med],
                }
            )
        for k, v in timings.items():
            found += find_spreads(v, f"{path}.{k}")
    return found


def make_candidate(task: str, nonce: str, directory: Path) -> Path:
    """The task's fast-path solution with a unique comment in its CUDA source: a new cache key, so every
    candidate is compiled like a fresh policy sample."""
    text = (FASTPATH / f"{task}.py").read_text()
    marker = 'CUDA_SRC = r"""'
    if marker not in text:
        raise ValueError(f"{task}: no CUDA_SRC to perturb")
    path = directory / f"{task}.py"
    path.write_text(text.replace(marker, marker + f"\n// candidate {nonce}", 1))
    return path


def step_e2e(args) -> dict:
    try:
        from kernels_env.client import SandboxClient
        from kernels_env.rules.config import JudgeConfig, SandboxConfig
    except Exception as exc:  # the sandbox is built in parallel; the compile numbers stand without it
        log(f"sandbox client not available ({type(exc).__name__}: {exc}); end-to-end step skipped")
        return {"available": False, "error": f"{type(exc).__name__}: {exc}"}
    tasks = list_tasks(getattr(args, "e2e_tasks", None) or args.tasks)
    work = Path(tempfile.mkdtemp(prefix="fastpath_e2e_"))
    baselines = [b for b in args.baselines.split(",") if b]
    out: dict = {"available": True, "tasks": tasks, "baselines": baselines, "warm": [], "sequential": []}

    def checkpoint() -> None:  # a step killed by its timeout still leaves what it measured
        write_json(getattr(args, "part_out", None), summarize_e2e(json.loads(json.dumps(out, default=str))))

    try:
        try:
            config = SandboxConfig(device="cuda", cache_dir=str(work / "sandbox_cache"))
        except TypeError:
            config = SandboxConfig(device="cuda")
        try:
            # CUDA Agent's policy: the benchmark's GEMM/conv solutions call cuBLAS/cuDNN, which the default
            # strict policy refuses (library_kernel); every other defence stays on.
            judge = JudgeConfig(baselines=baselines, policy="cuda_agent")
        except TypeError:
            judge = JudgeConfig()
        deadline = time.monotonic() + args.e2e_deadline_s
        start = time.perf_counter()
        with SandboxClient(config) as sandbox:
            out["client_start_s"] = time.perf_counter() - start

            def evaluate(task: str, solution: Path) -> dict:
                t0 = time.perf_counter()
                try:
                    res = _as_dict(
                        sandbox.evaluate(
                            reference=str(problem_path(task)), solution=str(solution), judge=judge
                        )
                    )
                    rec = {
                        "status": res.get("status"),
                        "reward": res.get("reward"),
                        "speedups": res.get("speedups"),
                        "durations": res.get("durations_s"),  # where a candidate's seconds go
                    }
                    rec["spreads"] = find_spreads(res.get("timings"))
                except Exception as exc:
                    rec = {"status": "benchmark_error", "error": f"{type(exc).__name__}: {exc}"[:1000]}
                rec.update(task=task, seconds=time.perf_counter() - t0)
                return rec

            log(f"warm-up: one evaluation per task builds the baselines ({','.join(baselines)})")
            for task in tasks:
                if time.monotonic() > deadline:
                    break
                rec = evaluate(task, FASTPATH / f"{task}.py")
                out["warm"].append(rec)
                checkpoint()
                log(f"  warm {task:24s} {rec['seconds']:.2f} s {rec['status']} {rec.get('error', '')[:150]}")
            seq_deadline = time.monotonic() + (deadline - time.monotonic()) * (
                0.6 if args.e2e_concurrency > 1 else 1.0
            )
            i = 0
            seq_start = time.perf_counter()
            while time.monotonic() < seq_deadline and i < args.max_candidates:
                task = tasks[i % len(tasks)]
                rec = evaluate(task, make_candidate(task, f"seq{i}-{uuid.uuid4().hex[:8]}", _fresh(work)))
                out["sequential"].append(rec)
                out["sequential_wall_s"] = time.perf_counter() - seq_start
                checkpoint()
                log(f"  cand {task:24s} {rec['seconds']:.2f} s {rec['status']} reward={rec.get('reward')}")
                i += 1
            out["sequential_wall_s"] = time.perf_counter() - seq_start
            if args.e2e_concurrency > 1 and time.monotonic() < deadline:
                out["concurrent"] = _concurrent_phase(evaluate, tasks, work, deadline, args.e2e_concurrency)
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summarize_e2e(out)


def _fresh(work: Path) -> Path:
    d = work / uuid.uuid4().hex[:12]
    d.mkdir()
    return d


def _concurrent_phase(evaluate, tasks, work, deadline, concurrency) -> dict:
    log(f"concurrent phase: {concurrency} evaluations in flight")
    counter = iter(range(10**9))
    recs: list[dict] = []
    lock = threading.Lock()

    def loop() -> None:
        while time.monotonic() < deadline:
            i = next(counter)
            task = tasks[i % len(tasks)]
            rec = evaluate(task, make_candidate(task, f"conc{i}-{uuid.uuid4().hex[:8]}", _fresh(work)))
            with lock:
                recs.append(rec)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for f in [pool.submit(loop) for _ in range(concurrency)]:
            f.result()
    return {"concurrency": concurrency, "wall_s": time.perf_counter() - start, "records": recs}


def _judged(records: list[dict]) -> int:
    return sum(r.get("status") == "correct" for r in records)


def summarize_e2e(out: dict) -> dict:
    if not out.get("available"):
        return out
    seq = out.get("sequential", [])
    ok = [r for r in seq if r.get("status") not in (None, "benchmark_error")]
    summary: dict = {"candidates": len(seq), "statuses": {}}
    for r in seq:
        summary["statuses"][str(r.get("status"))] = summary["statuses"].get(str(r.get("status")), 0) + 1
    # Only candidates that got a real verdict count as evaluated; every benchmark solution is correct, so
    # anything else is a failure of the run and must not inflate the rate.
    if ok and out.get("sequential_wall_s"):
        summary["seconds_per_candidate"] = stats([r["seconds"] for r in ok])
        summary["candidates_per_hour_sequential"] = 3600 * _judged(ok) / out["sequential_wall_s"]
    conc = out.get("concurrent")
    if conc and conc.get("records"):
        summary["candidates_per_hour_concurrent"] = 3600 * _judged(conc["records"]) / conc["wall_s"]
    rates = [summary.get(k) for k in ("candidates_per_hour_sequential", "candidates_per_hour_concurrent")]
    summary["candidates_per_hour"] = max((r for r in rates if r), default=None)
    spreads = [s for r in ok for s in r.get("spreads", []) if s["median_ms"] > TARGETS["spread_min_ms"]]
    summary["sandbox_spreads_over_100us"] = len(spreads)
    summary["sandbox_max_spread"] = max((s["spread"] for s in spreads), default=None)
    summary["sandbox_median_spread"] = statistics.median([s["spread"] for s in spreads]) if spreads else None
    out["summary"] = summary
    return out
