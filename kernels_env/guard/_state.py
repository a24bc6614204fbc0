"""Judge state a candidate must not change: torch's global flags and the identity of judge/timer/checker code.

``TorchGlobalState`` snapshots the process-wide switches that change numerics or baselines (TF32, reduced
precision reductions, flush-to-zero, autocast, default dtype, cuDNN/SDPA backends, determinism); a candidate
that flips one (catalogue #10) is reported and the switch is restored. ``Integrity`` snapshots the functions
and classes a judge relies on (timers, ``torch.cuda.Event``/``synchronize``, ``torch.allclose``, the torch
namespace, ``nn`` layers, ``json``/``os``, the ``kernels_env`` modules and their classes' methods) including
each function's code object, so both
replacing a function and swapping its ``__code__`` in place are caught and undone (catalogue #9).
"""

from __future__ import annotations

import builtins
import json
import math
import os
import statistics
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from . import _checks

_MISSING = object()
# Restored like every flag, never reported: cuDNN's algorithm autotuning changes which kernels a convolution
# runs, not precision (TF32 is its own flag) nor anything the judge compares or times for the baselines (a
# common, harmless line in public solutions; issue 31).
HARMLESS_FLAGS = frozenset({"cudnn.benchmark"})


def _attr_flag(obj_path: str, attr: str) -> tuple[Callable[[], Any], Callable[[Any], None]] | None:
    obj: Any = torch
    for part in obj_path.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    if not hasattr(obj, attr):
        return None
    return (lambda: getattr(obj, attr)), (lambda v: setattr(obj, attr, v))


_item, _mul, _full = torch._C.TensorBase.item, torch.mul, torch.full  # not patchable through torch.Tensor


def _flush_denormal_on() -> bool:
    # No getter exists: probe. A float32 subnormal survives a multiply by one unless FTZ/DAZ is on.
    with torch._C.DisableTorchFunction():
        return _item(_mul(_full((1,), 1e-39, dtype=torch.float32), 1.0)) == 0.0


def _autocast(device: str) -> tuple[Callable[[], Any], Callable[[Any], None]] | None:
    try:
        torch.is_autocast_enabled(device)
    except Exception:  # noqa: BLE001 - older/newer signatures differ; then this flag is not tracked
        return None
    return (lambda: torch.is_autocast_enabled(device)), (lambda v: torch.set_autocast_enabled(device, v))


def _flags() -> dict[str, tuple[bool, Callable[[], Any], Callable[[Any], None]]]:
    """name -> (affects precision, getter, setter) for every flag this torch build has."""
    flags: dict[str, tuple[bool, Callable[[], Any], Callable[[Any], None]]] = {}

    def add(name, precision, pair):
        if pair is not None:
            flags[name] = (precision, *pair)

    for attr in (
        "allow_tf32",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
        "allow_fp16_accumulation",
        "fp32_precision",
    ):
        add(f"cuda.matmul.{attr}", True, _attr_flag("torch.backends.cuda.matmul", attr))
    add("cudnn.allow_tf32", True, _attr_flag("torch.backends.cudnn", "allow_tf32"))
    for path in (
        "torch.backends",
        "torch.backends.cudnn",
        "torch.backends.cudnn.conv",
        "torch.backends.cudnn.rnn",
        "torch.backends.mkldnn",
        "torch.backends.mkldnn.matmul",
        "torch.backends.mkldnn.conv",
    ):
        add(f"{path.removeprefix('torch.')}.fp32_precision", True, _attr_flag(path, "fp32_precision"))
    add(
        "float32_matmul_precision",
        True,
        (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    )
    add("default_dtype", True, (torch.get_default_dtype, torch.set_default_dtype))
    add("flush_denormal", True, (_flush_denormal_on, torch.set_flush_denormal))
    add("autocast.cpu", True, _autocast("cpu"))
    add("autocast.cuda", True, _autocast("cuda"))
    add("cudnn.enabled", False, _attr_flag("torch.backends.cudnn", "enabled"))
    add("cudnn.benchmark", False, _attr_flag("torch.backends.cudnn", "benchmark"))
    add("cudnn.deterministic", False, _attr_flag("torch.backends.cudnn", "deterministic"))
    add("mkldnn.enabled", False, _attr_flag("torch.backends.mkldnn", "enabled"))
    add(
        "deterministic_algorithms",
        False,
        (
            lambda: (
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
            ),
            lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1]),
        ),
    )
    add("grad_enabled", False, (torch.is_grad_enabled, torch.set_grad_enabled))
    add("num_threads", False, (torch.get_num_threads, torch.set_num_threads))
    if hasattr(torch, "get_default_device"):
        add("default_device", False, (lambda: str(torch.get_default_device()), torch.set_default_device))
    sdp = torch.backends.cuda
    for kind in ("flash", "mem_efficient", "math", "cudnn"):
        get, put = getattr(sdp, f"{kind}_sdp_enabled", None), getattr(sdp, f"enable_{kind}_sdp", None)
        if get is not None and put is not None:
            add(f"sdp.{kind}", False, (get, put))
    return flags


@dataclass
class TorchGlobalState:
    values: dict[str, Any]

    @classmethod
    def capture(cls) -> TorchGlobalState:
        values = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, (_, get, _) in _flags().items():
                try:
                    values[name] = get()
                except Exception:  # noqa: BLE001 - a flag this build cannot read is not tracked
                    continue
        return cls(values)

    def diff(self, other: TorchGlobalState | None = None) -> dict[str, tuple[Any, Any]]:
        now = (other or TorchGlobalState.capture()).values
        return {k: (v, now.get(k, _MISSING)) for k, v in self.values.items() if now.get(k, _MISSING) != v}

    def restore(self) -> None:
        flags = _flags()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, value in self.values.items():
                if name in flags:
                    try:
                        if flags[name][1]() != value:
                            flags[name][2](value)
                    except Exception:  # noqa: BLE001 - best effort; the violation is reported anyway
                        continue

    def violations(self, other: TorchGlobalState | None = None, where: str = "") -> list[_checks.Violation]:
        changed = self.diff(other)
        flags = _flags()
        out = []
        for name, (before, after) in changed.items():
            if name in HARMLESS_FLAGS:
                continue
            precision = flags.get(name, (True,))[0]
            check = _checks.PRECISION_STATE if precision else _checks.GLOBAL_STATE
            out.append(
                _checks.Violation(
                    check,
                    f"torch global state {name} changed from {before!r} to {after!r}"
                    + (f" {where}" if where else ""),
                    {"flag": name, "before": repr(before), "after": repr(after)},
                )
            )
        return out


def _code_of(obj: Any) -> Any:
    for attr in ("__func__", "fget"):
        inner = getattr(obj, attr, None)
        if inner is not None and inner is not obj:
            obj = inner
            break
    code = getattr(obj, "__code__", None) if isinstance(obj, types.FunctionType) else None
    if code is None:
        return None
    return (code, obj.__defaults__, obj.__kwdefaults__)


def _tracked(obj: Any) -> bool:
    """Code the judge may call: functions, classes, descriptors. Plain data (flags, caches) is not code."""
    return callable(obj) or isinstance(obj, (property, staticmethod, classmethod, types.ModuleType))


def _default_containers() -> list[tuple[str, Any]]:
    import torch._dynamo  # noqa: F401 - imported lazily by the guard's modes; it rewraps torch.manual_seed
    import torch.nn as nn
    import torch.nn.functional as F

    out: list[tuple[str, Any]] = [
        ("builtins", builtins),
        ("time", time),
        ("math", math),
        ("statistics", statistics),  # the timing summary's median/quantiles (red-team patch_statistics_...)
        ("torch", torch),
        ("torch.nn.functional", F),
        ("torch.Tensor", torch.Tensor),
        ("torch.nn.Module", nn.Module),
        ("torch.cuda", torch.cuda),
        ("torch.testing", torch.testing),
    ]
    for name in ("Event", "Stream"):
        cls = getattr(torch.cuda, name, None)
        if isinstance(cls, type):
            out.append((f"torch.cuda.{name}", cls))
    for name, obj in vars(nn).items():
        if isinstance(obj, type) and issubclass(obj, nn.Module) and obj is not nn.Module:
            out.append((f"torch.nn.{name}", obj))
    np = sys.modules.get("numpy")
    if np is not None:
        out.append(("numpy", np))
    out += [("json", json), ("os", os)]  # what the worker encodes and writes its replies with
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] == "kernels_env" and isinstance(mod, types.ModuleType):
            out.append((name, mod))
            # The judge's own classes too: patching a method (say the guard's checks) is tampering.
            out += [
                (f"{name}.{attr}", obj)
                for attr, obj in list(vars(mod).items())
                if isinstance(obj, type) and getattr(obj, "__module__", None) == name
            ]
    return out


# Attributes torch itself rebinds when a tracked global setting changes (``set_default_dtype`` rebinds
# ``torch.Storage``): that change is reported by ``TorchGlobalState`` under its own name instead.
_REBOUND_BY_TORCH = frozenset({("torch", "Storage")})


class Integrity:
    """Identity (and code) of everything the judge calls, captured before the candidate is loaded."""

    def __init__(self, entries: dict[tuple[str, str], tuple[Any, Any, Any]], containers: dict[str, Any]):
        self._entries = entries
        self._containers = containers

    @classmethod
    def capture(cls, extra: Iterable[tuple[str, Any]] = ()) -> Integrity:
        containers = dict(_default_containers())
        containers.update(dict(extra))
        entries = {}
        for label, container in containers.items():
            for name, obj in list(vars(container).items()):
                if _tracked(obj) and (label, name) not in _REBOUND_BY_TORCH:
                    entries[(label, name)] = (container, obj, _code_of(obj))
        return cls(entries, containers)

    def changed(self) -> list[str]:
        bad = []
        for (label, name), (container, obj, code) in self._entries.items():
            now = vars(container).get(name, _MISSING)
            if now is not obj or (code is not None and _code_of(now) != code):
                bad.append(f"{label}.{name}")
        for label, container in self._containers.items():
            if isinstance(container, type):  # a new class attribute can shadow an inherited C method
                for name, obj in vars(container).items():
                    if (label, name) not in self._entries and _tracked(obj):
                        bad.append(f"{label}.{name} (added)")
        return sorted(bad)

    def restore(self) -> None:
        for (_, name), (container, obj, code) in self._entries.items():
            now = vars(container).get(name, _MISSING)
            if now is not obj:
                setattr(container, name, obj)
            target = getattr(obj, "__func__", None) or getattr(obj, "fget", None) or obj
            if code is not None and isinstance(target, types.FunctionType) and _code_of(obj) != code:
                target.__code__, target.__defaults__, target.__kwdefaults__ = code
        for label, container in self._containers.items():
            if isinstance(container, type):
                for name, obj in list(vars(container).items()):
                    if (label, name) not in self._entries and _tracked(obj):
                        delattr(container, name)

    def violations(self, where: str = "") -> list[_checks.Violation]:
        bad = self.changed()
        if not bad:
            return []
        msg = f"judge code replaced: {', '.join(bad[:5])}" + (" ..." if len(bad) > 5 else "")
        return [
            _checks.Violation(_checks.JUDGE_TAMPERED, msg + (f" {where}" if where else ""), {"changed": bad})
        ]
