"""Which device the sandbox uses: ``auto`` is CUDA when a GPU is visible, else CPU mode."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .errors import SandboxError

DEVICES = ("auto", "cpu", "cuda")


def visible_gpus() -> list[str]:
    """CUDA_VISIBLE_DEVICES-style ids of the GPUs this process may use (without initialising CUDA here)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None and not listed.strip():
        return []
    count = _count_nvidia_smi()
    if count is None:
        count = _count_torch_probe()
    ids = (
        [x.strip() for x in listed.split(",") if x.strip()]
        if listed is not None
        else [str(i) for i in range(count)]
    )
    return ids[:count]


def _count_nvidia_smi() -> int | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def _count_torch_probe() -> int:
    if not Path("/dev/nvidiactl").exists():
        return 0
    probe = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
        return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else 0
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return 0


def select(visible: list[str], ordinals: list[int] | None) -> list[str]:
    """The ids of ``visible`` at ``ordinals`` (None: all of them)."""
    if ordinals is None:
        return visible
    bad = [i for i in ordinals if not 0 <= i < len(visible)]
    if bad:
        raise SandboxError(
            f"sandbox.gpus {ordinals}: no GPU {bad} among the {len(visible)} visible {visible}"
        )
    return [visible[i] for i in ordinals]


def resolve(device: str, gpus: list[int] | None = None) -> tuple[str, list[str]]:
    """(cpu | cuda, the CUDA_VISIBLE_DEVICES ids of the run workers' GPUs); ``gpus`` picks some of the
    visible ones by ordinal."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; use one of {DEVICES}")
    if device == "cpu":
        return "cpu", []
    visible = visible_gpus()
    gpus = select(visible, gpus) if visible else []
    if device == "cuda" and not gpus:
        raise SandboxError("device='cuda' but no CUDA GPU is visible (use device='auto' or 'cpu')")
    return ("cuda", gpus) if gpus else ("cpu", [])
