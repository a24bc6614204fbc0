"""Inputs for correctness trials and timing, by family, from seeds the candidate cannot predict.

``make_inputs(problem, seed, family)`` is the one entry point: the ``random`` family replays the task's own
``get_inputs()`` under ``torch.manual_seed(seed)``. Other families (adversarial NaN/Inf, denormals, ...)
register with ``register_family`` (see kernels_env.adversarial) and receive the same arguments.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

InputFamily = Callable[[Any, int], list[Any]]
FAMILIES: dict[str, InputFamily] = {}


def register_family(name: str) -> Callable[[InputFamily], InputFamily]:
    def wrap(fn: InputFamily) -> InputFamily:
        FAMILIES[name] = fn
        return fn

    return wrap


def fresh_seed() -> int:
    """A seed from the OS entropy pool (not from any generator state the candidate could read or set)."""
    return int.from_bytes(os.urandom(8), "little") >> 1


@register_family("random")
def random_inputs(problem: Any, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    return list(problem.get_inputs())


def make_inputs(
    problem: Any, seed: int, family: str = "random", device: torch.device | str | None = None
) -> list:
    """The task's forward arguments for one trial, moved to ``device``; the global RNG is reseeded afterwards
    from OS entropy so nothing downstream can replay the seed."""
    if family not in FAMILIES:
        raise ValueError(f"unknown input family {family!r}; known: {sorted(FAMILIES)}")
    inputs = None
    if device is not None and torch.device(device).type == "cuda":
        try:  # the task's factories (torch.rand, ...) run on the GPU: much faster for large inputs
            with torch.device(device):
                inputs = FAMILIES[family](problem, seed)
        except Exception:  # a task that needs CPU tensors while building its inputs: build them there
            inputs = None
    if inputs is None:
        inputs = FAMILIES[family](problem, seed)
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
