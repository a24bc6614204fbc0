"""Sandbox throughput (issue 3, Benchmark): the fast path against torch's load_inline on the same CUDA
kernels, end-to-end evaluations per hour per GPU, and the spread of kernel timings.

    python -m benchmarks.sandbox.sandbox_throughput all --out results.json      # every step, then the report
    python -m benchmarks.sandbox.sandbox_throughput compile --out compile.json  # cold builds, both paths
    python -m benchmarks.sandbox.sandbox_throughput spread --out spread.json    # timing spread, timer alone
    python -m benchmarks.sandbox.sandbox_throughput e2e --out e2e.json          # through kernels_env.client
    python -m benchmarks.sandbox.sandbox_throughput report --parts DIR --out results.json [--markdown T.md]
    python -m benchmarks.sandbox.sandbox_throughput report --from results.json --markdown table.md

Problems (KernelBench format): benchmarks/sandbox/tasks/*.py, and example problems (examples/problems/) at
larger sizes (``_throughput/problems.py``). Solutions: benchmarks/sandbox/solutions/fastpath/<task>.py and its
load_inline variants run the same CUDA source (generated from it into the cache: ``load_inline_variants``).
Compile times are measured inside fresh processes around the import of a solution (which builds it), each with
empty KERNELS_ENV_CACHE_DIR / TORCH_EXTENSIONS_DIR, torch and CUDA already initialised. Both paths are also
measured at the same process concurrency, so the ratio compares like with like. Targets: compile >= 20x faster
than load_inline; >= 1,000 candidates/hour/GPU; IQR/median < 2% for kernels over 100 us.

This file is the command line; the steps live in ``benchmarks/sandbox/_throughput/``, one module each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._results import default_path, write_results
from benchmarks.sandbox._throughput.builds import step_compile, summarize_compile, worker
from benchmarks.sandbox._throughput.common import (
    FASTPATH,
    MODES,
    list_tasks,
    load_module,
    solution_path,
    stats,
    write_json,
)
from benchmarks.sandbox._throughput.e2e import find_spreads, make_candidate, step_e2e, summarize_e2e
from benchmarks.sandbox._throughput.problems import problem_path
from benchmarks.sandbox._throughput.report import markdown, plot, step_report
from benchmarks.sandbox._throughput.spread import step_spread

__all__ = [  # what tests and other benchmarks use from here
    "FASTPATH",
    "find_spreads",
    "list_tasks",
    "load_module",
    "make_candidate",
    "markdown",
    "plot",
    "problem_path",
    "solution_path",
    "stats",
    "step_report",
    "summarize_compile",
    "summarize_e2e",
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("all", "compile", "spread", "e2e"):
        s = sub.add_parser(name)
        s.add_argument("--out", default=None, help="results JSON (default: runs/benchmarks/)")
        s.add_argument("--tasks", default=None, help="comma-separated task names or prefixes (default: all)")
        if name in ("all", "compile"):
            s.add_argument(
                "--load-inline-tasks", default=None, help="subset built with load_inline (default: all)"
            )
            s.add_argument("--concurrency", type=int, default=8, help="build processes at once")
            s.add_argument(
                "--deadline-s",
                type=float,
                default=600,
                dest="compile_deadline_s",
                help="start no build after this many seconds",
            )
            s.add_argument("--build-timeout-s", type=float, default=300)
            s.add_argument("--skip-load-inline", action="store_true")
        if name in ("all", "spread"):
            s.add_argument("--iters", type=int, default=100)
            s.add_argument("--input-sets", type=int, default=3)
        if name in ("all", "e2e"):
            prefix = "--e2e-" if name == "all" else "--"
            s.add_argument(prefix + "deadline-s", type=float, default=120, dest="e2e_deadline_s")
            s.add_argument(
                prefix + "concurrency",
                type=int,
                default=1,
                dest="e2e_concurrency",
                help="evaluations in flight after the sequential phase (needs a thread-safe client)",
            )
            s.add_argument("--e2e-tasks" if name == "all" else "--only", default=None, dest="e2e_tasks")
            s.add_argument("--baselines", default="eager")
            s.add_argument("--max-candidates", type=int, default=1000)
        if name == "all":
            s.add_argument("--markdown", default=None)
    r = sub.add_parser("report")
    r.add_argument("--parts", default=None)
    r.add_argument("--from", dest="from_file", default=None)
    r.add_argument("--out", default=None)
    r.add_argument("--markdown", default=None)
    r.add_argument("--plot", default=None, help="PNG of per-task compile times")
    w = sub.add_parser("_worker")
    w.add_argument("--mode", choices=MODES, required=True)
    w.add_argument("--tasks", required=True)
    w.add_argument("--scratch", required=True)
    w.add_argument("--no-check", action="store_true")
    args = p.parse_args(argv)

    if args.cmd == "_worker":
        worker(args.mode, args.tasks.split(","), not args.no_check, Path(args.scratch))
        return 0
    if args.cmd == "report":
        if not (args.parts or args.from_file):
            p.error("report needs --parts DIR or --from results.json")
        results = step_report(args)
        write_results("sandbox_throughput", results, args.out)
        if args.markdown:
            Path(args.markdown).write_text(results["markdown"])
        if args.plot:
            plot(results, args.plot)
        print(results["markdown"])
        return 0
    steps = {"compile": step_compile, "spread": step_spread, "e2e": step_e2e}
    if args.cmd in steps:
        args.out = args.out or str(default_path(f"sandbox_throughput_{args.cmd}"))  # also the part file
        args.part_out = args.out
        data = _guarded(steps[args.cmd], args)
        write_results(f"sandbox_throughput_{args.cmd}", data, args.out)
        return 0 if "error" not in data else 1
    parts = Path(tempfile.mkdtemp(prefix="fastpath_parts_"))
    for name, fn in steps.items():
        args.part_out = str(parts / f"{name}.json")
        write_json(args.part_out, _guarded(fn, args))
    results = step_report(argparse.Namespace(from_file=None, parts=str(parts)))
    write_results("sandbox_throughput", results, args.out)
    if args.markdown:
        Path(args.markdown).write_text(results["markdown"])
    print(results["markdown"])
    return 0


def _guarded(fn, args) -> dict:
    start = time.perf_counter()
    try:
        data = fn(args)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        data = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    data["step_seconds"] = time.perf_counter() - start
    return data


if __name__ == "__main__":
    sys.exit(main())
