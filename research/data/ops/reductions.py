"""Reductions over one or more axes (category ``reduction``)."""

from __future__ import annotations

import numpy as np

from ._core import HEADS, IMAGES, SEQ, SPATIAL_RANK, VEC, Ctx, Dim, Op, Reject, TensorState
from ._helpers import done

ONE = Dim("1", 1, 1, 0)


def _plan(ctx: Ctx, t: TensorState, multi: bool):
    """Pick the reduced axes for this layout: returns (dim source, keepdim, new shape, new layout)."""
    s = t.shape
    if t.layout == VEC:
        return "1", False, (s[0],), "row"
    if t.layout == SEQ:
        if ctx.rng.random() < 0.5:
            return "-1", False, (s[0], s[1]), VEC
        return "1", False, (s[0], s[2]), VEC
    if t.layout == HEADS:
        return "1", False, (s[0], s[2], s[3]), SEQ
    if t.layout in IMAGES:
        k = SPATIAL_RANK[t.layout]
        if multi and ctx.rng.random() < 0.6:
            dims = "(" + ", ".join(str(2 + i) for i in range(k)) + ")"
            return dims, False, (s[0], s[1]), VEC
        if k == 1 and ctx.rng.random() < 0.5:
            return "2", False, (s[0], s[1]), VEC
        return "1", True, (s[0], ONE, *s[2:]), t.layout
    raise Reject(f"no reduction plan for layout {t.layout}")


def _reduce(
    name: str,
    template: str,
    desc: str,
    *,
    multi: bool = True,
    sign=None,
    bounded=None,
    dtype: str | None = None,
    terminal: bool = False,
) -> Op:
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        dim, keep, shape, layout = _plan(ctx, t, multi)
        kd = ", keepdim=True" if keep else ""
        ctx.fwd(f"x = {template.format(x=t.var, dim=dim, kd=kd)}")
        out = int(np.prod([d.real for d in shape]))
        ctx.mem_cost(t.numel(), t.numel(), out)
        axes = "x".join(dim.strip("()").replace(" ", "").split(","))
        changes = {"shape": tuple(shape), "layout": layout, "sign": t.sign if sign is None else sign}
        if bounded is not None:
            changes["bounded"] = bounded
        if dtype:
            changes["dtype"] = dtype
        return done(ctx, t, f"{name}[{axes}{'k' if keep else ''}]", f"{desc} over dim {dim}", **changes)

    layouts = frozenset({VEC, SEQ, HEADS, *IMAGES})
    return Op(name, "reduction", layouts, build, terminal=terminal, desc=desc)


OPS = [
    _reduce("sum", "torch.sum({x}, dim={dim}{kd})", "sum", bounded=False),
    _reduce("mean", "torch.mean({x}, dim={dim}{kd})", "mean"),
    _reduce("amax", "torch.amax({x}, dim={dim}{kd})", "max"),
    _reduce("amin", "torch.amin({x}, dim={dim}{kd})", "min"),
    _reduce("max_values", "torch.max({x}, dim={dim}{kd}).values", "max", multi=False),
    _reduce("min_values", "torch.min({x}, dim={dim}{kd}).values", "min", multi=False),
    _reduce("std", "torch.std({x}, dim={dim}{kd})", "standard deviation", sign="nonneg"),
    _reduce("var", "torch.var({x}, dim={dim}{kd})", "variance", sign="nonneg"),
    _reduce(
        "l2_norm", "torch.linalg.vector_norm({x}, dim={dim}{kd})", "L2 norm", sign="nonneg", bounded=False
    ),
    _reduce("logsumexp", "torch.logsumexp({x}, dim={dim}{kd})", "log-sum-exp", bounded=False),
    _reduce(
        "argmax", "torch.argmax({x}, dim={dim}{kd})", "argmax", multi=False, dtype="int64", terminal=True
    ),
    _reduce(
        "argmin", "torch.argmin({x}, dim={dim}{kd})", "argmin", multi=False, dtype="int64", terminal=True
    ),
]
