"""Build time of KernelBench-style load_inline solutions through the sandbox's build hooks, without and with
its shared precompiled torch/extension.h (kernels_env/judge/build/pch.py; issue 12).

    python -m benchmarks.sandbox.pch_builds [--solutions 01_relu,23_add,29_row_sum] [--json out.json]

Every build runs in a fresh process as the compile stage runs it (``KERNELS_ENV_BUILD_ONLY=1``, the hooks of
kernels_env.judge.build, content-keyed build directories; with a CPU-only torch CUDA sources are compiled and
linked against stubs, never loaded), each solution once per series, so no build finds another's objects:
  cold        ``KERNELS_ENV_PCH=off``: what builds cost without a PCH;
  pch first   ``KERNELS_ENV_PCH=wait``, empty cache: the first build also precompiles the header;
  pch next    the other solutions, the PCH ready.
Medians through kernels_env.judge.timing.summarize. Runs anywhere nvcc and g++ are (no GPU needed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._results import ROOT, write_results
from benchmarks.sandbox.load_inline_set import set_dir
from kernels_env.judge.timing.timer import summarize

DEFAULT = "01_relu,23_add,29_row_sum,33_row_softmax"


def one(solution: str, cache: str) -> dict:
    """Import one solution (its load_inline builds it) the way the compile stage does; time the import."""
    os.environ.update({"KERNELS_ENV_SANDBOX_CACHE": cache, "KERNELS_ENV_BUILD_ONLY": "1"})
    from kernels_env.judge.build import hooks
    from kernels_env.judge.build.cache import BUILDS
    from kernels_env.judge.build.loader import load_solution

    hooks.install_build_hooks(True, cache)
    start = time.perf_counter()
    load_solution(Path(solution), Path(solution).name)  # content-keyed builds, as in the compile stage
    return {"seconds": time.perf_counter() - start, "builds": BUILDS}


def run_one(solution: Path, cache: Path, mode: str) -> dict:
    # No GPU to ask: build for the H200's sm_90, one arch (load_inline's fastest).
    env = {"TORCH_CUDA_ARCH_LIST": "9.0", **os.environ, "KERNELS_ENV_PCH": mode}
    cmd = [sys.executable, "-m", "benchmarks.sandbox.pch_builds", "_one", str(solution), str(cache)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, cwd=ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        return {"solution": solution.stem, "error": (proc.stderr or proc.stdout)[-1500:]}
    rec = {"solution": solution.stem, "mode": mode, **json.loads(lines[-1][7:])}
    print(
        f"  {mode:5s} {solution.stem:18s} {rec['seconds']:7.1f} s  use_pch={rec['builds'][0].get('use_pch')}"
    )
    return rec


def summary(cold: list[dict], pch: list[dict]) -> dict:
    """Seconds: the cold builds' median, the PCH series' first build (it precompiles the header) and the
    median of the rest; the solutions that failed in either series."""
    ok = lambda recs: [r["seconds"] for r in recs if "seconds" in r]
    return {
        "cold_median_s": summarize(ok(cold))["median_ms"] if ok(cold) else None,
        "pch_first_s": ok(pch[:1])[0] if ok(pch[:1]) else None,
        "pch_next_median_s": summarize(ok(pch[1:]))["median_ms"] if ok(pch[1:]) else None,
        "errors": [r["solution"] for r in cold + pch if "error" in r],
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_one"]:
        print("RESULT " + json.dumps(one(argv[1], argv[2])), flush=True)
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--solutions", default=DEFAULT, help="comma-separated stems of the load_inline set")
    p.add_argument("--json", default=None, help="results JSON (default: runs/benchmarks/)")
    args = p.parse_args(argv)
    sols = [set_dir() / "solutions" / f"{s.strip()}.py" for s in args.solutions.split(",") if s.strip()]
    missing = [s.stem for s in sols if not s.is_file()]
    if not sols or missing:  # before any build: each costs a process and minutes
        print(f"pch_builds: no such solution in the load_inline set: {','.join(missing) or '(none given)'}")
        return 2
    import torch

    config = {
        "solutions": [s.stem for s in sols],
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cpu_count": os.cpu_count(),
        "torch_cuda_arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0"),
        "cxx": subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
    }
    print("config:", json.dumps(config))
    out: dict = {"benchmark": "pch_builds", "config": config}
    with tempfile.TemporaryDirectory(prefix="pch_builds_") as tmp:
        print("cold (no PCH), fresh cache per build:")
        out["cold"] = [run_one(s, Path(tmp) / f"cold_{s.stem}", "off") for s in sols]
        print("shared PCH, one cache (the first build also precompiles torch/extension.h):")
        out["pch"] = [run_one(s, Path(tmp) / "pch", "wait") for s in sols]
    out["summary"] = summary(out["cold"], out["pch"])
    print("results (seconds; summarize's *_ms keys hold seconds here):", json.dumps(out["summary"]))
    write_results("pch_builds", out, args.json, indent=1)
    return 0 if not out["summary"]["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
