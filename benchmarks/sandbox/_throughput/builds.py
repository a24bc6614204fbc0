"""The compile benchmark: cold builds of the same CUDA source through the fast path and through
load_inline, each in a fresh process (``sandbox_throughput.py _worker``) with empty build caches."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import ROOT
from .common import init_torch, list_tasks, load_module, log, solution_path, stats, write_json
from .problems import problem_path

ENTRY = "benchmarks.sandbox.sandbox_throughput"  # its ``_worker`` command runs ``worker`` below
RESULT_PREFIX = "RESULT "


def check_solution(task: str, solution, torch) -> dict:
    """ModelNew against Model on one input set (seed-replayed weights, fp32 atol = rtol = 1e-4)."""
    ref = load_module(problem_path(task), f"ref_{task}_{uuid.uuid4().hex[:6]}")
    init = ref.get_init_inputs()
    torch.manual_seed(42)
    model = ref.Model(*init).cuda()
    torch.manual_seed(42)
    new = solution.ModelNew(*init).cuda()
    torch.manual_seed(1234)
    with torch.device("cuda"):  # torch.rand in get_inputs() draws on the GPU: same distribution, no host copy
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    with torch.no_grad():
        expected = model(*inputs)
        got = new(*inputs)
    torch.cuda.synchronize()
    same_shape = tuple(got.shape) == tuple(expected.shape) and got.dtype == expected.dtype
    ok = same_shape and bool(torch.allclose(got, expected, atol=1e-4, rtol=1e-4))
    err = (got.double() - expected.double()).abs().max().item() if same_shape else None
    del model, new, inputs, expected, got
    torch.cuda.empty_cache()
    return {"correct": ok, "max_abs_err": err}


def worker(mode: str, tasks: list[str], check: bool, scratch: Path) -> None:
    """Builds each task's solution in this process and prints one RESULT line per task."""
    torch = init_torch()
    cuda = torch.cuda.is_available()
    for task in tasks:
        fresh = scratch / f"{mode}-{task}-{uuid.uuid4().hex[:8]}"
        os.environ["KERNELS_ENV_CACHE_DIR"] = str(fresh / "fastpath_cache")
        os.environ["TORCH_EXTENSIONS_DIR"] = str(fresh / "torch_extensions")
        rec: dict = {"task": task, "mode": mode, "pid": os.getpid()}
        start = time.perf_counter()
        try:
            module = load_module(solution_path(mode, task), f"sol_{mode}_{task}_{uuid.uuid4().hex[:6]}")
            rec["compile_s"] = time.perf_counter() - start
            if mode == "fastpath":
                rec["builds"] = [
                    {
                        k: getattr(v.build, k)
                        for k in ("cache_hit", "compile_seconds", "seconds", "built_seconds")
                    }
                    for v in vars(module).values()
                    if type(v).__name__ in ("CudaLibrary", "NvrtcKernel")
                ]
        except BaseException as exc:  # a broken solution is a result, not a crash of the benchmark
            rec["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            rec.setdefault("compile_s", None)
        if check and cuda and "error" not in rec:
            try:
                rec.update(check_solution(task, module, torch))
            except BaseException as exc:
                rec.update(correct=False, check_error=f"{type(exc).__name__}: {exc}"[:2000])
        print(RESULT_PREFIX + json.dumps(rec), flush=True)
        shutil.rmtree(fresh, ignore_errors=True)


def run_worker(mode: str, tasks: list[str], check: bool, scratch: Path, timeout_s: float) -> list[dict]:
    cmd = [
        sys.executable,
        "-m",
        ENTRY,
        "_worker",
        "--mode",
        mode,
        "--tasks",
        ",".join(tasks),
    ]
    cmd += ["--scratch", str(scratch)] + ([] if check else ["--no-check"])
    start = time.perf_counter()
    # Own session, so a timeout also ends the worker's compilers (ninja, nvcc, cc1plus) instead of leaving
    # them to steal CPU from the next measurement.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        err, rc = f"timed out after {timeout_s:.0f} s", -9
    wall = time.perf_counter() - start
    recs = [json.loads(ln[len(RESULT_PREFIX) :]) for ln in out.splitlines() if ln.startswith(RESULT_PREFIX)]
    done = {r["task"] for r in recs}
    for task in tasks:
        if task not in done:
            recs.append(
                {"task": task, "mode": mode, "compile_s": None, "error": f"worker rc={rc}: {err[-1500:]}"}
            )
    for r in recs:
        r["process_wall_s"] = wall
    return recs


def run_pool(
    mode: str,
    tasks: list[str],
    concurrency: int,
    check: bool,
    scratch: Path,
    deadline: float,
    timeout_s: float,
    results: list[dict] | None = None,
    progress: Callable[[], None] | None = None,
) -> list[dict]:
    """One process per task, ``concurrency`` at a time; tasks not started before ``deadline`` are skipped.
    Records are appended to ``results`` as they arrive and ``progress()`` is called after each."""
    results = [] if results is None else results
    lock = threading.Lock()

    def one(task: str) -> None:
        if time.monotonic() > deadline:
            rec = [{"task": task, "mode": mode, "compile_s": None, "skipped": "deadline reached"}]
        else:
            rec = run_worker(mode, [task], check, scratch, timeout_s)
        with lock:
            results.extend(rec)
            r = rec[0]
            err = (r.get("error") or "").strip().splitlines()
            state = f"ERROR {err[-1][:200]}" if err else f"{r['compile_s']:.2f} s"
            state = "skipped" if r.get("skipped") else state
            log(f"  {mode:11s} {task:24s} {state}" + (f" correct={r['correct']}" if "correct" in r else ""))
            if progress is not None:
                progress()

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        list(pool.map(one, tasks))
    results.sort(key=lambda r: r["task"])
    return results


def _compile_summary(records: list[dict]) -> dict:
    times = [r["compile_s"] for r in records if r.get("compile_s") is not None and not r.get("error")]
    out = stats(times)
    out["tasks"] = len(records)
    out["failed"] = sorted(r["task"] for r in records if r.get("error"))
    out["skipped"] = sorted(r["task"] for r in records if r.get("skipped"))
    out["incorrect"] = sorted(r["task"] for r in records if r.get("correct") is False)
    out["check_errors"] = {r["task"]: r["check_error"][:300] for r in records if r.get("check_error")}
    return out


def step_compile(args) -> dict:
    tasks = list_tasks(args.tasks)
    li_tasks = list_tasks(args.load_inline_tasks) if args.load_inline_tasks else tasks
    scratch = Path(tempfile.mkdtemp(prefix="fastpath_bench_"))
    deadline = time.monotonic() + args.compile_deadline_s
    out: dict = {"tasks": tasks, "load_inline_tasks": li_tasks, "concurrency": args.concurrency}

    def checkpoint() -> None:  # a step killed by its timeout still leaves what it measured
        write_json(
            getattr(args, "part_out", None), summarize_compile(json.loads(json.dumps(out, default=str)))
        )

    try:
        log(f"fast path, one process, sequential, with correctness checks: {len(tasks)} tasks")
        out["fastpath_solo"] = run_worker("fastpath", tasks, True, scratch, timeout_s=150)
        out["fastpath_solo"].sort(key=lambda r: r["task"])
        for r in out["fastpath_solo"]:
            log(
                f"  fastpath    {r['task']:24s} {r.get('compile_s') or float('nan'):.3f} s "
                f"correct={r.get('correct')} {r.get('error', '')[:200]}"
            )
        checkpoint()
        log(f"fast path, {args.concurrency} processes at once (like load_inline below)")
        out["fastpath_concurrent"] = []
        run_pool(
            "fastpath", tasks, args.concurrency, False, scratch, deadline, 90, out["fastpath_concurrent"]
        )
        checkpoint()
        if not args.skip_load_inline:
            log(f"load_inline, {args.concurrency} processes at once: {len(li_tasks)} tasks")
            out["load_inline_concurrent"] = []
            run_pool(
                "load_inline",
                li_tasks,
                args.concurrency,
                True,
                scratch,
                deadline,
                args.build_timeout_s,
                out["load_inline_concurrent"],
                checkpoint,
            )
            # The peer in load_inline's fastest documented form (use_pch=True, wrappers in cpp_sources, no
            # torch headers for nvcc): alone, then at the sandbox's concurrency. torch keeps its PCH in its
            # install directory, so the first build of the solo run also precompiles torch/extension.h.
            for key, conc in (
                ("load_inline_fast_solo", 1),
                ("load_inline_fast_concurrent", args.concurrency),
            ):
                log(f"load_inline fastest form, {conc} at once: {len(li_tasks)} tasks")
                out[key] = []
                run_pool(
                    "load_inline_fast",
                    li_tasks,
                    conc,
                    True,
                    scratch,
                    deadline,
                    args.build_timeout_s,
                    out[key],
                    checkpoint,
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return summarize_compile(out)


def summarize_compile(out: dict) -> dict:
    fp_solo = {r["task"]: r for r in out.get("fastpath_solo", [])}
    fp_conc = {r["task"]: r for r in out.get("fastpath_concurrent", [])}
    li = {r["task"]: r for r in out.get("load_inline_concurrent", [])}
    fast_solo = {r["task"]: r for r in out.get("load_inline_fast_solo", [])}
    fast_conc = {r["task"]: r for r in out.get("load_inline_fast_concurrent", [])}
    summary = {
        "fastpath_solo": _compile_summary(list(fp_solo.values())),
        "fastpath_concurrent": _compile_summary(list(fp_conc.values())),
        "load_inline_concurrent": _compile_summary(list(li.values())),
        "load_inline_fast_solo": _compile_summary(list(fast_solo.values())),
        "load_inline_fast_concurrent": _compile_summary(list(fast_conc.values())),
    }
    measured = [t for t in li if li[t].get("compile_s") and not li[t].get("error")]

    def med(recs: dict, tasks: list[str]) -> float | None:
        xs = [recs[t]["compile_s"] for t in tasks if t in recs and recs[t].get("compile_s")]
        return statistics.median(xs) if xs else None

    li_med = med(li, measured)
    fp_conc_med = med(fp_conc, measured)
    fp_solo_med = med(fp_solo, measured)
    summary["paired_tasks"] = measured
    summary["speedup_same_concurrency"] = li_med / fp_conc_med if li_med and fp_conc_med else None
    summary["speedup_vs_solo_fastpath"] = li_med / fp_solo_med if li_med and fp_solo_med else None
    fast_med = med(fast_conc, [t for t in measured if t in fast_conc])
    fast_fp = med(fp_conc, [t for t in measured if t in fast_conc])
    summary["speedup_vs_fastest_load_inline"] = fast_med / fast_fp if fast_med and fast_fp else None
    per_task = []
    for t in out.get("tasks", []):
        row = {"task": t}
        modes = (
            ("fastpath_solo", fp_solo),
            ("fastpath_concurrent", fp_conc),
            ("load_inline", li),
            ("load_inline_fast_solo", fast_solo),
            ("load_inline_fast_concurrent", fast_conc),
        )
        for key, recs in modes:
            r = recs.get(t, {})
            row[f"{key}_s"] = r.get("compile_s")
            if "correct" in r:
                row[f"{key}_correct"] = r["correct"]
            if r.get("error") or r.get("skipped") or r.get("check_error"):
                row[f"{key}_note"] = (r.get("error") or r.get("skipped") or r.get("check_error"))[:300]
        per_task.append(row)
    summary["per_task"] = per_task
    out["summary"] = summary
    return out
