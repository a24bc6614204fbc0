"""Reference timings (eager, ``torch.compile`` default, max-autotune), measured once and cached on disk.

The cache key holds everything a timing depends on: the SHA-256 of the reference source, the input and
constructor-argument spec, the device (GPU name, driver), torch/CUDA/Triton versions, the mode, the precision
(TF32 on/off), train/eval, the timing settings and, when above 1 and timing without the GPU lock, the run
workers sharing the device. Any change is a miss; stale entries are never reused.
``torch._dynamo.reset()`` separates the compiled modes.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ...host.cache import JsonCache
from ...host.environment import device_key
from ...rules.protocols import JudgeSettings
from .timer import time_callable

CACHE_FORMAT = 1
COMPILE_MODES = {"compile": None, "max-autotune": "max-autotune"}


def baseline_key(
    reference_source: str,
    input_spec: Any,
    init_spec: Any,
    env: Mapping[str, Any],
    mode: str,
    settings: JudgeSettings,
) -> dict[str, Any]:
    # Timed while other run workers shared the device: disturbed, so never served to (or from) a run that
    # times alone. Only then in the key, so the entries of the default (alone) keep their keys. Under the GPU
    # lock (timing_lock) every measurement held the device alone: keyed as alone, shared with N = 1 runs.
    disturbed = settings.device_shared_by > 1 and not settings.timing_lock
    shared = {"device_shared_by": settings.device_shared_by} if disturbed else {}
    return {
        **shared,
        "format": CACHE_FORMAT,
        "reference_sha256": hashlib.sha256(reference_source.encode()).hexdigest(),
        "inputs": input_spec,
        "init_inputs": init_spec,
        **device_key(env),
        "mode": mode,
        "precision": "tf32" if settings.allow_tf32 else "fp32",
        "model_mode": settings.mode,
        "timing": dict(settings.timing),
    }


def set_precision(allow_tf32: bool) -> None:
    """TF32 for matmul and cuDNN on or off, whichever of torch's two flag APIs is in use."""
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
    try:
        torch.backends.cudnn.allow_tf32 = allow_tf32
    except RuntimeError:  # the newer fp32_precision API was used in this process
        torch.backends.cudnn.fp32_precision = "tf32" if allow_tf32 else "ieee"


def measure(
    model: torch.nn.Module,
    mode: str,
    input_sets: Sequence[Sequence[Any]],
    settings: JudgeSettings,
    device: torch.device,
) -> dict[str, Any]:
    """Time ``model`` in ``mode``; a failure (say torch.compile rejects the model) is reported, not raised."""
    started = time.perf_counter()
    try:
        set_precision(bool(settings.allow_tf32))
        if mode == "eager":
            fn = model
        else:
            torch._dynamo.reset()
            fn = torch.compile(model, mode=COMPILE_MODES[mode])
        with torch.no_grad():
            out = time_callable(fn, input_sets, settings.timing, device)
        out["measure_s"] = round(time.perf_counter() - started, 3)
        return out
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()[-4000:]}
    finally:
        set_precision(False)
        if mode != "eager":
            torch._dynamo.reset()


def cached_baselines(
    cache: JsonCache,
    keys: Mapping[str, dict[str, Any]],
    compute,
) -> dict[str, Any]:
    """For each mode: the cached entry, else ``compute(mode)`` (stored unless it failed). Adds ``cached``."""
    out = {}
    for mode, key in keys.items():
        hit = cache.get(key)
        if hit is not None:
            out[mode] = {**hit, "cached": True}
            continue
        value = compute(mode)
        if "error" not in value:
            cache.put(key, value)
        out[mode] = {**value, "cached": False}
    return out
