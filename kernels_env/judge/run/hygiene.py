"""Worker hygiene between requests: torch settings a candidate may change, module and memory cleanup, and
the device health check that decides whether a run worker must be replaced."""

from __future__ import annotations

import contextlib
import gc
import sys
from pathlib import Path

import psutil
import torch

from ...guard import TorchGlobalState
from ...host.processes import OWN_SESSIONS, in_own_session
from ..build import loader
from ..timing.baselines import set_precision


def reset_extension_versioner() -> None:
    """torch numbers same-named load_inline builds per process; start from zero so the compile stage's build
    (in a fresh process) is the one this worker finds."""
    ce = sys.modules.get("torch.utils.cpp_extension")
    versioner = getattr(ce, "JIT_EXTENSION_VERSIONER", None)
    if versioner is not None and hasattr(versioner, "entries"):
        versioner.entries.clear()


def health_check(device: torch.device) -> str | None:
    """None when the device still works after a request; else the error (the worker must be replaced)."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
        x = torch.ones(8, device=device)
        if float((x + 1).sum().item()) != 16.0:
            return "device returned a wrong result for a trivial computation"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:1000]
    return None


GLOBAL_STATE: GlobalState | None = None  # captured by the worker at start-up


def restore_global_state() -> None:
    if GLOBAL_STATE is not None:
        GLOBAL_STATE.restore()


class GlobalState:
    """Torch settings a candidate could change for everyone after it (the guard's ``TorchGlobalState``: TF32
    and reduced-precision flags, flush-to-zero, autocast, default dtype/device, grad mode, determinism, cuDNN,
    SDPA backends, thread count), captured at worker start and restored before every reference call and after
    every request. Only what changed is set back (some setters are slow the first time they run)."""

    def __init__(self) -> None:
        set_precision(False)  # the judge's own default: full FP32 (torch enables TF32 for cuDNN by default)
        self.saved = TorchGlobalState.capture()

    def restore(self) -> None:
        self.saved.restore()


def cleanup(workdir: str, device: torch.device, state: GlobalState) -> None:
    loader.unload(under=Path(workdir) if workdir else None)
    state.restore()
    dynamo_utils = sys.modules.get("torch._dynamo.utils")
    if dynamo_utils is not None and any(getattr(dynamo_utils, "counters", {}).get("frames", {}).values()):
        with contextlib.suppress(Exception):  # torch.compile ran (e.g. a kernelbench-policy candidate)
            torch._dynamo.reset()
    gc.collect()
    if device.type == "cuda":
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()


def child_processes() -> set[int]:
    """Process ids of this worker's descendants, but the sandbox's own helpers (a pre-started profiling
    process, ``host.processes.OWN_SESSIONS``): a profiler it started mid-request is not the candidate's."""
    try:
        pids = {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()
    return {pid for pid in pids if not in_own_session(pid)} if OWN_SESSIONS else pids


def kill_new_children(before: set[int]) -> list[dict]:
    """Kill descendants that appeared since ``before`` (a candidate's processes outliving its request: they
    would share this worker's descriptors, its reply channel among them); what was killed."""
    killed = []
    for pid in sorted(child_processes() - before):
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            killed.append({"pid": pid, "name": proc.name(), "cmdline": " ".join(proc.cmdline())[:200]})
            proc.kill()
    for item in killed:
        with contextlib.suppress(psutil.Error):
            psutil.Process(item["pid"]).wait(timeout=5)
    return killed
