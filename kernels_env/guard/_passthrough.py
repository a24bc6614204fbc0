"""ModelNew as a pass-through of the reference Model (KernelBench's "inheritance bypass").

A solution that subclasses a copy of ``Model`` and keeps its forward (no forward of its own, or one that
calls ``super().forward``) hands the task back to PyTorch. Under ``strict`` that is caught as PyTorch compute
anyway; under ``kernelbench``, where PyTorch glue is allowed, it needs its own check. It is decided at
runtime: the forward of a base class of ModelNew whose bytecode is the reference's forward (the reference
class itself, or a copy of its source: same instructions, constants and names, other file and lines) must
never be running while an operator is dispatched. ModelNew's own forward is never suspected, even when it
reads like the reference's (``return self.conv(x)`` with a custom ``conv`` is a legitimate solution).
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import torch

# id(code) -> (the code object, kept alive and compared by identity; the base class's name)
PassthroughCodes = dict[int, tuple[types.CodeType, str]]


def fingerprint(code: types.CodeType) -> tuple:
    """What a copy of the same source shares with the original: instructions, constants (nested code
    recursively), names and signature; not the file name or line numbers."""
    consts = tuple(
        fingerprint(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
        for c in code.co_consts
    )
    return (
        code.co_code,
        consts,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_argcount,
        code.co_kwonlyargcount,
    )


def _own_forward(cls: type) -> types.CodeType | None:
    return getattr(cls.__dict__.get("forward"), "__code__", None)


def passthrough_codes(model: Any, references: Iterable[Any]) -> PassthroughCodes:
    """The forwards of ModelNew's base classes that are the reference's forward (empty for anything that is
    not an ``nn.Module``, and for a ModelNew that inherits nothing like it: the runtime check then costs
    nothing)."""
    if not isinstance(model, torch.nn.Module):
        return {}
    ref_classes = {r if isinstance(r, type) else type(r) for r in references}
    prints = {fingerprint(c) for c in map(_own_forward, ref_classes) if c is not None}
    out: PassthroughCodes = {}
    for base in type(model).__mro__[1:]:
        code = _own_forward(base)
        if code is None or base is torch.nn.Module:
            continue
        if base in ref_classes or fingerprint(code) in prints:
            out[id(code)] = (code, base.__qualname__)
    return out


def passthrough_frame(frame: types.FrameType | None, codes: PassthroughCodes) -> types.FrameType | None:
    """The innermost frame at or above ``frame`` that runs one of ``codes``."""
    while frame is not None:
        entry = codes.get(id(frame.f_code))
        if entry is not None and entry[0] is frame.f_code:
            return frame
        frame = frame.f_back
    return None
