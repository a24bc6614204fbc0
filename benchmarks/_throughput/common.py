"""What every step shares: the task list and its two solution sets, module loading, the torch/CUDA
set-up of a measuring process, sample statistics, logging and part files."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from . import ROOT
from .problems import task_names

SOLUTIONS = ROOT / "benchmarks" / "solutions"
MODES = ("fastpath", "load_inline", "load_inline_fast")  # the last: use_pch, wrappers in cpp_sources
TARGETS = {"compile_speedup": 20.0, "candidates_per_hour": 1000.0, "spread": 0.02, "spread_min_ms": 0.1}


def log(msg: str) -> None:
    print(f"[sandbox_throughput {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def list_tasks(selection: str | None = None) -> list[str]:
    """Task stems that have both solutions, optionally filtered by comma-separated names or prefixes."""
    tasks = [t for t in task_names() if all((SOLUTIONS / mode / f"{t}.py").exists() for mode in MODES)]
    if selection:
        wanted = [w.strip() for w in selection.split(",") if w.strip()]
        tasks = [t for t in tasks if any(t == w or t.startswith(w) for w in wanted)]
    return tasks


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
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(path).with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, default=str))
        os.replace(tmp, path)
