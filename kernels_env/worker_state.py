"""Worker hygiene between requests: torch settings a candidate may change, module and memory cleanup, and
the device health check that decides whether a run worker must be replaced."""

from __future__ import annotations

import contextlib
import gc
import sys
from pathlib import Path
from typing import Any

import torch

from . import loader
from .baselines import set_precision


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
    """Torch settings a candidate could change for everyone after it; restored after every request."""

    def __init__(self) -> None:
        self.saved = self._read()

    @staticmethod
    def _read() -> dict[str, Any]:
        return {
            "default_dtype": torch.get_default_dtype(),
            "grad": torch.is_grad_enabled(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "num_threads": torch.get_num_threads(),
        }

    def restore(self) -> None:
        """Set back what changed (only that: some setters are slow the first time they run)."""
        now = self._read()
        s = self.saved
        if now["default_dtype"] != s["default_dtype"]:
            torch.set_default_dtype(s["default_dtype"])
        if now["grad"] != s["grad"]:
            torch.set_grad_enabled(s["grad"])
        if now["deterministic"] != s["deterministic"]:
            torch.use_deterministic_algorithms(s["deterministic"])
        if now["cudnn_benchmark"] != s["cudnn_benchmark"]:
            torch.backends.cudnn.benchmark = s["cudnn_benchmark"]
        if now["cudnn_deterministic"] != s["cudnn_deterministic"]:
            torch.backends.cudnn.deterministic = s["cudnn_deterministic"]
        if now["num_threads"] != s["num_threads"]:
            torch.set_num_threads(s["num_threads"])
        set_precision(False)


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
