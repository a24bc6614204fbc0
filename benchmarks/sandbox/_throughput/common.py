"""What every step shares: the task list and its two solution sets, module loading, the torch/CUDA
set-up of a measuring process, sample statistics, logging and part files."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

from benchmarks import _results

from . import AREA
from .problems import task_names

FASTPATH = AREA / "solutions" / "fastpath"  # hand-written; the load_inline variants are generated from it
MODES = ("fastpath", "load_inline", "load_inline_fast")  # the last: use_pch, wrappers in cpp_sources
TARGETS = {"compile_speedup": 20.0, "candidates_per_hour": 1000.0, "spread": 0.02, "spread_min_ms": 0.1}


def log(msg: str) -> None:
    print(f"[sandbox_throughput {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def list_tasks(selection: str | None = None) -> list[str]:
    """Task stems with a fast-path solution (its load_inline variants are generated from every one),
    optionally filtered by comma-separated names or prefixes."""
    tasks = [t for t in task_names() if (FASTPATH / f"{t}.py").exists()]
    if selection:
        wanted = [w.strip() for w in selection.split(",") if w.strip()]
        tasks = [t for t in tasks if any(t == w or t.startswith(w) for w in wanted)]
    return tasks


def solution_path(mode: str, task: str) -> Path:
    """A task's solution in one of ``MODES``: the fast path's from git, the load_inline variants from the
    cache (generated from the fast path's on first use)."""
    if mode == "fastpath":
        return FASTPATH / f"{task}.py"
    from benchmarks.sandbox.load_inline_variants import variants_dir

    return variants_dir() / mode / f"{task}.py"


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def stats(values: list[float]) -> dict:
    """The sandbox's own sample statistics (``kernels_env.judge.timing.summarize``) plus spread (IQR/median),
    unit-free keys (the values here are seconds as often as milliseconds)."""
    from kernels_env.judge.timing.timer import summarize  # imports torch: only when a sample is summarised

    if not values:
        return {"count": 0}
    s = {k.removesuffix("_ms"): v for k, v in summarize(values).items()}
    return {**s, "spread": s["iqr"] / s["median"] if s["median"] else None}


def init_torch():
    from kernels_env.fastpath import toolchain

    if toolchain.cuda_home() and not os.environ.get("CUDA_HOME"):
        os.environ["CUDA_HOME"] = toolchain.cuda_home()  # the toolkit both paths use; read by load_inline
    import torch

    if torch.cuda.is_available():
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # context created before any timer starts
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False  # references in true FP32, like the kernels
        major, minor = torch.cuda.get_device_capability()
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")  # load_inline's fastest: one arch
    return torch


def write_json(path: str | None, data: dict) -> None:
    """A step's part file (atomic), when the step has one; the final results go through ``write_results``."""
    if path:
        _results.write_json(path, data, indent=1)
