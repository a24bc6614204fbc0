"""Inputs for correctness trials and timing, by family, from seeds the candidate cannot predict.

``make_inputs(problem, seed, family)`` is the one entry point (trials, timed calls, adversarial families, the
degenerate-task audit): the task's own ``get_inputs()`` runs under ``torch.manual_seed(seed)`` in a *fresh*
module built from the problem's source, so a candidate that changed the loaded problem module (say its batch
size, catalogue #11) changes nothing the judge generates; then the family's transformation. ``random`` is the
task's distribution; the adversarial families (NaN/Inf, denormals, ...) register with ``register_family`` in
``kernels_env.judge.check.adversarial``, and every family receives the same ``(problem, seed)`` arguments.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from .oom import is_oom

InputFamily = Callable[[Any, int], list[Any]]
FAMILIES: dict[str, InputFamily] = {}
# The device ``make_inputs`` builds for (None: where the task's factories put them), for ``random_inputs``:
# every family starts from it, so each family's own transformation runs on the device too.
_DEVICE: contextvars.ContextVar[torch.device | None] = contextvars.ContextVar("kernels_env_inputs_device")


def register_family(name: str) -> Callable[[InputFamily], InputFamily]:
    def wrap(fn: InputFamily) -> InputFamily:
        FAMILIES[name] = fn
        return fn

    return wrap


def fresh_seed() -> int:
    """A seed from the OS entropy pool (not from any generator state the candidate could read or set)."""
    return int.from_bytes(os.urandom(8), "little") >> 1


def fresh_module(source: str, filename: str, name: str = "kernels_env_problem") -> types.ModuleType:
    """A new module executed from ``source`` (frames carry ``filename``: the judge attributes them)."""
    module = types.ModuleType(name)
    module.__file__ = filename
    previous = sys.modules.get(name)
    sys.modules[name] = module  # dataclasses & co. look their module up while it executes
    try:
        exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - problems are trusted
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
    return module


def problem_module(problem: Any) -> Any:
    """What ``get_inputs`` is taken from: a fresh module when the problem's source is known (an object with
    ``source`` and ``path``, or a file path), else the object itself (a module, a test double)."""
    if isinstance(problem, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(problem))
        with open(path) as f:
            return fresh_module(f.read(), path)
    source = getattr(problem, "source", None)
    if isinstance(source, str) and source:
        return fresh_module(source, os.fspath(getattr(problem, "path", "<problem>")))
    return problem


def _task_inputs(problem: Any, seed: int) -> list[Any]:
    module = problem_module(problem)
    torch.manual_seed(seed)
    return list(module.get_inputs())


@register_family("random")
def random_inputs(problem: Any, seed: int) -> list[Any]:
    """The task's own ``get_inputs()`` under ``seed``; inside ``make_inputs`` for a GPU, built there."""
    device = _DEVICE.get(None)
    if device is None or device.type != "cuda":
        return _task_inputs(problem, seed)
    try:  # the task's factories (torch.rand, ...) run on the GPU: much faster for large inputs
        with torch.device(device):
            return _task_inputs(problem, seed)
    except Exception as exc:
        if is_oom(exc):
            # The judge's own out-of-memory (its plan decides what fits): never a second build on the
            # host, whose copy of a 16 GiB input crossed the host-memory limit (H200, KernelBench L1 #45).
            raise
    # A task that needs host tensors while building its inputs (numpy, ...): built there (one set of the
    # inputs on the host, briefly: ``MemoryPlan.host_bytes``), then moved before any family changes them.
    with torch.device("cpu"):
        return to_device(_task_inputs(problem, seed), device)


def make_inputs(
    problem: Any, seed: int, family: str = "random", device: torch.device | str | None = None
) -> list:
    """The task's forward arguments for one trial, moved to ``device``; the global RNG is reseeded afterwards
    from OS entropy so nothing downstream can replay the seed. Every call returns new storage.

    On a GPU the task's inputs are built there (``random_inputs``) and the family transforms them there: no
    step of it keeps a host copy of the inputs, and an out-of-memory error is raised, not retried on the
    host (once a device failure of any step rebuilt the whole family on the host: 16 GiB of CPU tensors, a
    host randperm of 4e9 elements)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown input family {family!r}; known: {sorted(FAMILIES)}")
    target = torch.device(device) if device is not None else None
    token = _DEVICE.set(target)
    try:
        cuda = target is not None and target.type == "cuda"
        with torch.device(target) if cuda else contextlib.nullcontext():  # the family's factories too
            inputs = FAMILIES[family](problem, seed)
    finally:
        _DEVICE.reset(token)
    torch.manual_seed(fresh_seed())
    return to_device(inputs, device) if device is not None else inputs


def to_device(value: Any, device: torch.device | str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def clone(value: Any) -> Any:
    """Deep copy of tensors (fresh storage) so neither model sees the other's buffers or in-place writes."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list | tuple):
        return type(value)(clone(v) for v in value)
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    return value


def spec(value: Any) -> Any:
    """Shapes/dtypes (tensors) and values (everything else): what the baseline cache is keyed on."""
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, list | tuple):
        return [spec(v) for v in value]
    if isinstance(value, dict):
        return {str(k): spec(v) for k, v in value.items()}
    return repr(value)


def nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values())
    return 0
