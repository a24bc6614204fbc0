"""The interception layers: a TorchFunctionMode, a TorchDispatchMode and a global module pre-hook.

- TorchDispatchMode sees every ATen operator after decomposition, whoever called it: Python (``torch.*``,
  ``@``, tensor methods, ``F.*``, ``nn`` layers) and C++ (``torch::`` compute inside a load_inline extension).
  Each call is judged by the policy (``Policy.decide``); a forbidden call is recorded and raised *before*
  it runs, so a candidate that catches the error gains nothing and still fails. Fresh ``empty*`` results are
  poisoned; writes into the judge's input tensors are caught here too.
- TorchFunctionMode sees the Python torch API. It tells Python calls (``origin='python'``) from compiled
  code (no Python torch call in progress), catches host escapes that never reach the dispatcher
  (``numpy()``, ``tolist()``, ``__array__``, printing), notices a disabled torch-function layer, and lets the
  internals of a composite a policy lists in ``allowed_ops`` count as that composite (``F.linear``).
- The module pre-hook names a call to the reference ``Model`` (or anything the judge marks as forbidden);
  the dispatch mode also notices the reference's forward running as an inherited base-class method of
  ModelNew (``reference_passthrough``, see ``_passthrough``).
- Every PyTorch compute operator it lets through is counted (``Guard.torch_ops``: the verdict's
  ``correctness.torch_ops``).
"""

from __future__ import annotations

import sys
from collections import Counter
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch
from torch.autograd.profiler import record_function
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils._python_dispatch import TorchDispatchMode

from ..rules.operators import (
    ALLOWED,
    BOOKKEEPING_WRITES,
    FORBIDDEN,
    HOST_ESCAPE,
    POISONED_ALLOC,
    RAW_MEMORY,
    torch_compute,
)
from ..rules.policies import Policy
from . import _checks
from ._frames import REFERENCE, RUNTIME, FrameClassifier, describe
from ._memory import poison_tensor
from ._passthrough import PassthroughCodes, passthrough_frame


class GuardState(Protocol):
    """What the interception layers read and write of their ``_guard.Guard`` (which owns them: it names this
    interface rather than importing the class back)."""

    rules: Policy
    classifier: FrameClassifier
    forbidden_modules: tuple[Any, ...]
    passthrough_codes: PassthroughCodes
    input_storages: set[Any]
    torch_ops: Counter[str]
    function_mode: Any
    poison: bool
    dispatched: int
    marker: str
    constructor_marker: str
    _internal: bool
    _tf_stack: list[str]

    def violate(self, check: str, message: str, evidence: dict | None = None) -> None: ...

    def internal(self) -> AbstractContextManager[None]: ...


_HOST_ESCAPE_FUNCS = frozenset(
    {"numpy", "tolist", "__array__", "__repr__", "__str__", "__format__", "__reduce_ex__", "__getstate__"}
)
# Tensor constructors from host data or foreign device memory (CuPy, DLPack). PyTorch builds these with the
# Python dispatch key excluded, so their internal empty/copy calls never reach the mode: the trace audit lets
# ops under this scope through. Given a torch.Tensor to copy they are a clone, judged as one.
_CONSTRUCTORS = frozenset({"tensor", "as_tensor", "asarray", "from_numpy", "frombuffer", "from_dlpack"})
_INTERPRETER_FILE = ("triton", "runtime", "interpreter.py")
_DECISION_CHECK = {
    FORBIDDEN: _checks.FORBIDDEN_OP,
    HOST_ESCAPE: _checks.HOST_ESCAPE,
    RAW_MEMORY: _checks.FORBIDDEN_OP,
}


def _func_name(func: Any) -> str:
    if isinstance(func, torch._ops.OpOverload):
        return func.__name__.split(".")[0]
    name = getattr(func, "__name__", None)
    if name is None:  # getset descriptors (x.shape, x.dtype): metadata
        name = (
            getattr(getattr(func, "__objclass__", None), "__name__", "")
            + "."
            + str(getattr(func, "name", ""))
        )
    return name


def _is_interpreter(filename: str) -> bool:
    parts = filename.replace("\\", "/").split("/")
    return tuple(parts[-3:]) == _INTERPRETER_FILE


# not shared with DispatchMode: two torch hooks with their own bases; they share only a short prologue
class FunctionMode(TorchFunctionMode):
    def __init__(self, guard: GuardState):
        super().__init__()
        self.guard = guard

    def __torch_function__(self, func, types, args=(), kwargs=None):
        g = self.guard
        kwargs = kwargs or {}
        if g._internal:
            return func(*args, **kwargs)
        name = _func_name(func)
        if name in _HOST_ESCAPE_FUNCS or (name == "item" and not g.rules.extra.get("allow_item")):
            frame, kind = g.classifier.user_frame(sys._getframe(1))
            if not (kind == RUNTIME and _is_interpreter(frame.f_code.co_filename)):
                g.violate(
                    _checks.HOST_ESCAPE,
                    f"tensor data read on the host with {name}() inside forward",
                    {"function": name, "frame": describe(frame)},
                )
        g._tf_stack.append(name)
        try:
            if name in _CONSTRUCTORS:
                copies_tensor = any(isinstance(a, torch.Tensor) for a in (*args[:1], kwargs.get("data")))
                if copies_tensor and g.rules.decide("aten", "clone", "python") != ALLOWED:
                    frame, _ = g.classifier.user_frame(sys._getframe(1))
                    g.violate(
                        _checks.FORBIDDEN_OP,
                        f"torch.{name} copying a tensor is a clone, not allowed under "
                        f"policy '{g.rules.name}'",
                        {"op": f"torch.{name}", "frame": describe(frame)},
                    )
                with record_function(g.constructor_marker):
                    return func(*args, **kwargs)
            return func(*args, **kwargs)
        finally:
            g._tf_stack.pop()


class DispatchMode(TorchDispatchMode):
    def __init__(self, guard: GuardState):
        super().__init__()
        self.guard = guard

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        g = self.guard
        kwargs = kwargs or {}
        if g._internal:
            return func(*args, **kwargs)
        g.dispatched += 1
        with record_function(g.marker):
            self._judge(func, args, kwargs)
            out = func(*args, **kwargs)
            if g.poison and func.namespace == "aten" and _func_name(func) in POISONED_ALLOC:
                with g.internal():
                    torch.utils._pytree.tree_map_only(torch.Tensor, poison_tensor, out)
            return out

    def _judge(self, func, args, kwargs) -> None:
        g = self.guard
        name = _func_name(func)
        frame, kind = g.classifier.user_frame(sys._getframe(2))
        where = describe(frame)
        if kind == RUNTIME and frame is not None and _is_interpreter(frame.f_code.co_filename):
            origin = "runtime"
        elif g._tf_stack:
            origin = "python"
        else:
            origin = "compiled"
            if (
                torch._C._is_torch_function_all_disabled()
                or g.function_mode not in _get_current_function_mode_stack()
            ):
                g.violate(
                    _checks.GUARD_BYPASS,
                    f"torch-function interception disabled around {func}",
                    {"op": str(func), "frame": where},
                )
        if kind == REFERENCE:
            g.violate(
                _checks.REFERENCE_MODEL_CALLED,
                f"reference code ran inside forward ({func})",
                {"op": str(func), "frame": where},
            )
        if g.passthrough_codes:
            self._judge_passthrough(func, sys._getframe(2))
        covered = (
            origin == "python" and g.rules.allowed_ops and any(n in g.rules.allowed_ops for n in g._tf_stack)
        )
        decision = ALLOWED if covered else g.rules.decide(func.namespace, name, origin)
        if decision != ALLOWED:
            api = g._tf_stack[0] if g._tf_stack else None
            g.violate(
                _DECISION_CHECK[decision],
                f"{func} is not allowed under policy '{g.rules.name}'"
                + (f" (called as {api})" if api else "")
                + f" [origin: {origin}]",
                {"op": str(func), "python_api": api, "origin": origin, "frame": where},
            )
        if origin != "runtime" and torch_compute(func.namespace, name):
            g.torch_ops[f"{func.namespace}::{name}"] += 1
        if g.input_storages and origin != "runtime" and name not in BOOKKEEPING_WRITES:
            for value in _written_args(func, args, kwargs):
                if isinstance(value, torch.Tensor) and _storage_key(value) in g.input_storages:
                    g.violate(
                        _checks.INPUT_MUTATION,
                        f"{func} writes into an input tensor",
                        {"op": str(func), "frame": where},
                    )

    def _judge_passthrough(self, func, frame) -> None:
        """The reference's forward (inherited by ModelNew, or reached through ``super().forward``) is running:
        ModelNew passes the call through to a copy of Model (KernelBench's inheritance bypass)."""
        g = self.guard
        found = passthrough_frame(frame, g.passthrough_codes)
        if found is not None:
            base = g.passthrough_codes[id(found.f_code)][1]
            g.violate(
                _checks.REFERENCE_PASSTHROUGH,
                f"ModelNew runs the reference's forward (inherited from {base}, or called through super()) "
                f"instead of its own ({func})",
                {"op": str(func), "frame": describe(found), "base": base},
            )


def _storage_key(t: torch.Tensor):
    try:
        return (t.device.type, t.untyped_storage().data_ptr())
    except Exception:  # noqa: BLE001 - tensors without storage (meta/fake) cannot alias an input
        return None


def _written_args(func, args, kwargs):
    schema = func._schema
    for i, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        if i < len(args) and not arg.kwarg_only:
            yield args[i]
        elif arg.name in kwargs:
            yield kwargs[arg.name]


def module_pre_hook(guard: GuardState):
    def hook(module, args):
        if guard._internal or not guard.forbidden_modules:
            return None
        if any(
            module is m or (isinstance(m, type) and isinstance(module, m)) for m in guard.forbidden_modules
        ):
            frame, _ = guard.classifier.user_frame(sys._getframe(1))
            guard.violate(
                _checks.REFERENCE_MODEL_CALLED,
                f"the reference {type(module).__name__} was called inside forward",
                {"module": type(module).__qualname__, "frame": describe(frame)},
            )
        return None

    return hook
