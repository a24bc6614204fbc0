"""Prefix scans along one axis (category ``scan``)."""

from __future__ import annotations

from ._core import HEADS, IMG1D, SEQ, VEC, Ctx, Op, TensorState
from ._helpers import done

LAYOUTS = frozenset({VEC, SEQ, HEADS, IMG1D})


def _scan(name: str, template: str, desc: str, *, sign=None, bounded=False, last_only=False, **kw) -> Op:
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        dim = ctx.choice(["-1", "1"]) if t.layout in (SEQ, HEADS) and not last_only else "-1"
        ctx.fwd(f"x = {template.format(x=t.var, dim=dim)}")
        ctx.mem_cost(t.numel(), t.numel(), t.numel(), flops_per=2)
        return done(
            ctx,
            t,
            f"{name}[{dim}]",
            f"{desc} along dim {dim}",
            sign=t.sign if sign is None else sign,
            bounded=bounded,
        )

    return Op(name, "scan", LAYOUTS, build, desc=desc, **kw)


OPS = [
    _scan("cumsum", "torch.cumsum({x}, dim={dim})", "cumulative sum", sign="any"),
    _scan("cummax", "torch.cummax({x}, dim={dim}).values", "cumulative maximum", bounded=True),
    _scan("cummin", "torch.cummin({x}, dim={dim}).values", "cumulative minimum", bounded=True),
    _scan("logcumsumexp", "torch.logcumsumexp({x}, dim={dim})", "log-cumsum-exp", sign="any"),
    _scan(
        "reverse_cumsum",
        "torch.flip(torch.cumsum(torch.flip({x}, [{dim}]), dim={dim}), [{dim}])",
        "reverse cumulative sum",
        sign="any",
    ),
    _scan("cumsum_exclusive", "torch.cumsum({x}, dim={dim}) - {x}", "exclusive cumulative sum", sign="any"),
    _scan(
        "cummean",
        "torch.cumsum({x}, dim={dim}) / torch.arange(1, {x}.shape[{dim}] + 1, device={x}.device"
        ", dtype={x}.dtype)",
        "running mean",
        sign=None,
        bounded=True,
        last_only=True,
    ),
]
