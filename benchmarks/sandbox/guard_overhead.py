"""What one guarded forward costs (issue 3 throughput, issue 5 defences): the reward-hack guard around a
benchmark solution's ModelNew, with each of its switches off in turn, and the guard's parts alone.

    python -m benchmarks.sandbox.guard_overhead --out guard.json [--tasks 01_relu,10_matmul] [--calls 8]

Runs in-process on one device (CUDA when visible, else CPU; CPU numbers only show Python-side costs, and a
CPU run needs ``--solutions-dir`` with solutions that run there, e.g. Triton under its interpreter). For
every task: median wall seconds of ``model(*inputs)`` plain, under ``policy_guard`` with every defence on, and
with one switch off (``census``+``trace`` = no profiler, ``poison``, ``watch``, ``threads``); then the guard's
parts alone (profiler start/stop with event parsing, allocator snapshot + poisoning, judge-code integrity
check, global-state and thread snapshots). The judge's per-candidate cost is ~18 guarded forwards, so a
part that costs 0.3 s here costs ~5 s per evaluated candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks._results import write_results
from benchmarks.sandbox._throughput.common import FASTPATH as SOLUTIONS

VARIANTS = {
    "all_on": {},
    "no_profiler": {"census": False, "trace": False},
    "no_poison": {"poison": False},
    "no_watch": {"watch": False},
    "no_threads": {"threads": False},
    "all_off": {"census": False, "trace": False, "poison": False, "watch": False, "threads": False},
}


def _median_s(fn, calls: int, warm: int = 2) -> float:
    for _ in range(warm):
        fn()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure_task(task: str, calls: int, policy: str, device, tasks: Path | None, solutions: Path) -> dict:
    import torch

    from benchmarks.sandbox._throughput.common import load_module
    from benchmarks.sandbox._throughput.problems import problem_path
    from kernels_env.guard import Integrity, ThreadSnapshot, policy_guard, warm_up_profiler

    problem_file = tasks / f"{task}.py" if tasks else problem_path(task)
    problem = load_module(problem_file, f"bench_task_{task}")
    solution = load_module(solutions / f"{task}.py", f"bench_solution_{task}")
    model = solution.ModelNew(*problem.get_init_inputs()).to(device).eval()
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    warm_up_profiler(cuda)
    integrity, threads = Integrity.capture(), ThreadSnapshot.capture()
    paths = {"candidate_paths": [str(solutions)], "reference_paths": [str(problem_file)]}

    def plain() -> None:
        with torch.no_grad():
            model(*inputs)
        sync()

    def guarded(switches: dict):
        def call() -> None:
            with (
                torch.no_grad(),
                policy_guard(
                    policy,
                    inputs=inputs,
                    device=device,
                    integrity=integrity,
                    thread_baseline=threads,
                    **paths,
                    **switches,
                ) as g,
            ):
                g(model, *inputs)
            sync()

        return call

    out = {"task": task, "plain_s": _median_s(plain, calls)}
    out["guarded_s"] = {name: _median_s(guarded(sw), calls) for name, sw in VARIANTS.items()}
    out["parts_s"] = _parts(torch, device, cuda, integrity, calls, plain)
    return out


def _parts(torch, device, cuda: bool, integrity, calls: int, plain) -> dict:
    from kernels_env.guard import ThreadSnapshot, TorchGlobalState
    from kernels_env.guard._guard import _Profiler
    from kernels_env.guard._memory import poison_free_cuda_memory

    def profiled() -> None:
        prof = _Profiler(cuda)
        with prof:
            plain()
        list(prof.events())

    parts = {
        "profiler_around_plain_call": _median_s(profiled, calls),
        "integrity_check": _median_s(lambda: integrity.violations("bench"), calls),
        "global_state_capture": _median_s(TorchGlobalState.capture, calls),
        "thread_snapshot": _median_s(ThreadSnapshot.capture, calls),
    }
    if cuda:
        parts["allocator_snapshot"] = _median_s(torch.cuda.memory_snapshot, calls)
        parts["poison_free_memory"] = _median_s(lambda: poison_free_cuda_memory(device), calls)
        parts["reserved_bytes"] = torch.cuda.memory_reserved(device)
    return parts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="01_relu,05_softmax,10_matmul")
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--policy", default="cuda_agent")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument(
        "--tasks-dir",
        type=Path,
        default=None,
        help="<task>.py problems (default: the throughput benchmark's)",
    )
    ap.add_argument("--solutions-dir", type=Path, default=SOLUTIONS, help="<task>.py solutions")
    ap.add_argument("--out", default=None, help="results JSON (default: runs/benchmarks/)")
    args = ap.parse_args(argv)
    os.environ.setdefault("KERNELS_ENV_CACHE_DIR", str(Path("/tmp") / f"guard_overhead_{os.getpid()}"))
    import torch

    name = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        print("guard_overhead: --device cuda, but no CUDA device is visible")
        return 2
    if name == "cpu" and args.solutions_dir.resolve() == SOLUTIONS.resolve():
        # the fast path's solutions are NVRTC kernels: every task would only record "cannot run"
        print("guard_overhead: the fast-path solutions need a CUDA device; on a CPU pass --solutions-dir")
        return 2
    device = torch.device(name, 0) if name == "cuda" else torch.device("cpu")
    if name == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    results = []
    for task in [t for t in args.tasks.split(",") if t]:
        try:
            rec = measure_task(task, args.calls, args.policy, device, args.tasks_dir, args.solutions_dir)
        except Exception as exc:
            rec = {"task": task, "error": f"{type(exc).__name__}: {exc}"[:1000]}
        results.append(rec)
        print(json.dumps(rec, indent=None, default=str), flush=True)
    doc = {
        "device": torch.cuda.get_device_name(0) if name == "cuda" else "cpu",
        "torch": torch.__version__,
        "policy": args.policy,
        "calls": args.calls,
        "date": time.strftime("%Y-%m-%d"),
        "results": results,
    }
    write_results("guard_overhead", doc, args.out)
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
