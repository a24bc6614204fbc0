"""The seed operator library: every op by name, with its category, layouts, dtype and value-domain rules.

Categories follow the issue: elementwise (incl. activations), reduction, normalization, matmul, conv (incl.
pooling and resampling), attention (softmax variants and attention), loss, scan, indexing, transformer.
"""

from __future__ import annotations

from . import attention, conv, elementwise, indexing, linear, losses, norms, reductions, scans, transformer
from ._core import (
    FLOAT_LAYOUTS,
    FLOATS,
    Const,
    Ctx,
    Dim,
    InputSpec,
    Op,
    Reject,
    TensorState,
)

CATEGORIES = (
    "elementwise",
    "reduction",
    "normalization",
    "matmul",
    "conv",
    "attention",
    "loss",
    "scan",
    "indexing",
    "transformer",
)

LIBRARY: dict[str, Op] = {}
for _module in (
    elementwise,
    reductions,
    norms,
    linear,
    conv,
    attention,
    losses,
    scans,
    indexing,
    transformer,
):
    for _op in _module.OPS:
        if _op.name in LIBRARY:
            raise RuntimeError(f"duplicate op name {_op.name!r} in the operator library")
        if _op.category not in CATEGORIES:
            raise RuntimeError(f"op {_op.name!r} has unknown category {_op.category!r}")
        LIBRARY[_op.name] = _op


def ops_in(category: str) -> list[Op]:
    return [op for op in LIBRARY.values() if op.category == category]


def category_of(op_name: str) -> str:
    return LIBRARY[op_name].category


__all__ = [
    "CATEGORIES",
    "FLOATS",
    "FLOAT_LAYOUTS",
    "LIBRARY",
    "Const",
    "Ctx",
    "Dim",
    "InputSpec",
    "Op",
    "Reject",
    "TensorState",
    "category_of",
    "ops_in",
]
