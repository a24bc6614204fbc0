"""Describe where a verdict was produced: device, driver, CUDA, torch, Triton, Python (recorded in results).

Runs inside worker processes (imports torch). ``device_key`` is the part that baselines are keyed on.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import shutil
import subprocess
import sys
from typing import Any


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # an optional package that fails to import is simply absent
        return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nvidia_smi(*fields: str) -> dict[str, str] | None:
    """``nvidia-smi --query-gpu=FIELDS`` of the first GPU as {field: value}; None without nvidia-smi/GPU."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    values = [v.strip() for v in out.stdout.strip().splitlines()[0].split(",")]
    return dict(zip(fields, values)) if len(values) == len(fields) else None


def _driver_version() -> str | None:
    return (nvidia_smi("driver_version") or {}).get("driver_version")


def cuda_driver_api() -> str | None:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            return f"{v.value // 1000}.{(v.value % 1000) // 10}"
    except OSError:
        pass
    return None


@functools.cache
def environment(device: str) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "triton": _version("triton"),
        "cupy": _version("cupy"),
        "numpy": _version("numpy"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": _cpu_name(),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(
            gpu=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            l2_cache_bytes=int(getattr(props, "L2_cache_size", 0)),
            gpu_memory_gb=round(props.total_memory / 2**30, 1),
            driver=_driver_version(),
            cuda_driver=cuda_driver_api(),
        )
    else:
        env.update(gpu=None, driver=None, cuda_driver=None)
    return env


def device_key(env: dict[str, Any]) -> dict[str, Any]:
    """The fields of the environment that make timings comparable (and baselines reusable)."""
    return {
        "device": env["device"],
        "device_name": env.get("gpu") or env.get("cpu"),
        "driver": env.get("driver"),
        "torch": env["torch"],
        "cuda_runtime": env.get("cuda_runtime"),
        "triton": env.get("triton"),
    }
