"""Small builders shared by the op modules (unary elementwise maps, channel parameters, reductions)."""

from __future__ import annotations

from ._core import FLOAT_LAYOUTS, FLOATS, IMAGES, Ctx, Op, TensorState


def done(ctx: Ctx, t: TensorState, sig: str, desc: str, **changes) -> TensorState:
    ctx.sig.append(sig)
    ctx.descs.append(desc)
    return t.replace(var="x", **changes)


def unary(
    name: str,
    template: str,
    desc: str,
    *,
    params: dict | None = None,
    sign: str | None = "any",
    bounded: bool | None = None,
    flops: float = 1.0,
    layouts=FLOAT_LAYOUTS,
    dtypes=FLOATS,
    category: str = "elementwise",
    **op_kw,
) -> Op:
    """An elementwise map ``x = template(x)``; ``sign=None`` keeps the input's value domain."""

    def build(ctx: Ctx, t: TensorState) -> TensorState:
        kw = {k: ctx.choice(v) for k, v in (params or {}).items()}
        ctx.fwd(f"x = {template.format(x=t.var, **kw)}")
        ctx.mem_cost(t.numel(), t.numel(), flops_per=flops)
        changes = {"sign": t.sign if sign is None else sign}
        if bounded is not None:
            changes["bounded"] = bounded
        return done(ctx, t, name, desc.format(**kw), **changes)

    return Op(name, category, frozenset(layouts), build, dtypes=frozenset(dtypes), desc=desc, **op_kw)


def channel_dim(t: TensorState) -> int:
    """The axis a per-channel/per-feature parameter lives on: channels for images, the last axis otherwise."""
    return 1 if t.layout in IMAGES else t.rank - 1


def param_shape(ctx: Ctx, t: TensorState) -> str:
    """Source for a broadcastable per-channel parameter shape, e.g. ``out_channels, 1, 1``."""
    axis = channel_dim(t)
    return ctx.code(t.shape[axis]) + ", 1" * (t.rank - 1 - axis)
