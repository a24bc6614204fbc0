"""Convolutions, transposed convolutions, pooling and resampling (category ``conv``)."""

from __future__ import annotations

import numpy as np

from ._core import BYTES, IMAGES, IMG1D, IMG2D, IMG3D, SPATIAL_RANK, Ctx, Dim, Op, Reject, TensorState
from ._helpers import done

ONE = Dim("1", 1, 1, 0)


def _out_dim(d: Dim, k: int, s: int, p: int) -> Dim:
    """Spatial size after a window of k with stride s and padding p, spelled the way a person would."""
    if s == 1 and 2 * p == k - 1:
        return d
    if s == 1:
        shrink = k - 1 - 2 * p
        return d.derive("{} - " + str(shrink), lambda v: v - shrink)
    if k == s and p == 0:
        return d.derive("{} // " + str(s), lambda v: v // s)
    off = 2 * p - k
    sign = "+" if off >= 0 else "-"
    return d.derive(f"({{}} {sign} {abs(off)}) // {s} + 1", lambda v: (v + off) // s + 1)


def _conv(rank: int, transposed: bool = False, depthwise: bool = False):
    layout = {1: IMG1D, 2: IMG2D, 3: IMG3D}[rank]
    kind = "ConvTranspose" if transposed else "Conv"

    def build(ctx: Ctx, t: TensorState) -> TensorState:
        n, c, *spatial = t.shape
        if transposed:
            k, s, p, opad = ctx.choice([(3, 2, 1, 1), (4, 2, 1, 0), (3, 1, 1, 0), (2, 2, 0, 0)])
            out_sp = [d if s == 1 else d.derive("{} * 2", lambda v: v * 2) for d in spatial]
        else:
            k, s = ctx.choice(
                [(3, 1), (3, 1), (5, 1), (3, 2), (1, 1), (7, 1)] if rank < 3 else [(3, 1), (3, 2)]
            )
            p = ctx.choice([0, k // 2])
            opad = 0
            out_sp = [_out_dim(d, k, s, p) for d in spatial]
        oc = c if depthwise else ctx.dim("out_channels", "channels")
        ks = ctx.hyper("kernel_size", k)
        args = [ctx.code(c), ctx.code(oc), ks.expr]
        if s != 1:
            args.append(f"stride={s}")
        if p:
            args.append(f"padding={p}")
        if opad:
            args.append(f"output_padding={opad}")
        if depthwise:
            args.append(f"groups={ctx.code(c)}")
        conv = ctx.attr("conv_transpose" if transposed else "conv")
        ctx.init(f"{conv} = nn.{kind}{rank}d({', '.join(args)}{ctx.dk})")
        ctx.fwd(f"x = {conv}({t.var})")
        out_shape = (n, oc, *out_sp)
        out_numel = int(np.prod([d.real for d in out_shape]))
        cin = 1 if depthwise else c.real
        macs = (t.numel() * oc.real if transposed else out_numel * cin) * k**rank
        size = BYTES[ctx.dtype]
        ctx.cost("conv", flops=2.0 * macs, bytes=size * (t.numel() + out_numel + c.real * oc.real * k**rank))
        name = f"{'depthwise_' if depthwise else ''}{kind.lower()}{rank}d"
        return done(
            ctx,
            t,
            f"{name}[k{k}s{s}p{p}]",
            f"a {k}x{k} {'depthwise ' if depthwise else ''}{kind}{rank}d",
            shape=out_shape,
            sign="any",
        )

    return Op(
        f"{'depthwise_' if depthwise else ''}{kind.lower()}{rank}d",
        "conv",
        frozenset({layout}),
        build,
        desc=f"{kind}{rank}d",
    )


def _pool(kind: str):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        rank = SPATIAL_RANK[t.layout]
        k, s, p = ctx.choice([(2, 2, 0), (3, 2, 1), (3, 1, 1)] if kind != "lp" else [(2, 2, 0), (3, 2, 0)])
        n, c, *spatial = t.shape
        out_sp = [_out_dim(d, k, s, p) for d in spatial]
        if kind == "lp":
            if rank != 2:
                raise Reject("lp_pool only for 2-D")
            ctx.fwd(f"x = F.lp_pool2d({t.var}, norm_type=2, kernel_size={k}, stride={s})")
        else:
            pad = f", padding={p}" if p else ""
            ctx.fwd(f"x = F.{kind}_pool{rank}d({t.var}, kernel_size={k}, stride={s}{pad})")
        out = (n, c, *out_sp)
        ctx.mem_cost(t.numel(), t.numel(), int(np.prod([d.real for d in out])), flops_per=k**rank / s**rank)
        sign = "nonneg" if kind == "lp" else t.sign
        return done(ctx, t, f"{kind}_pool{rank}d[k{k}s{s}p{p}]", f"{kind} pooling", shape=out, sign=sign)

    return Op(
        f"{kind}_pool", "conv", IMAGES if kind != "lp" else frozenset({IMG2D}), build, desc=f"{kind} pool"
    )


def _adaptive(kind: str):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        rank = SPATIAL_RANK[t.layout]
        n, c, *spatial = t.shape
        o = ctx.choice([1, 1, 2, 4])
        if any(d.proxy < o for d in spatial):
            raise Reject("adaptive pool output larger than the proxy input")
        ctx.fwd(f"x = F.adaptive_{kind}_pool{rank}d({t.var}, {o})")
        od = Dim(str(o), o, o, 0)
        ctx.mem_cost(t.numel(), t.numel())
        return done(
            ctx,
            t,
            f"adaptive_{kind}_pool{rank}d[{o}]",
            f"adaptive {kind} pooling to {o}",
            shape=(n, c, *[od] * rank),
            sign=t.sign,
        )

    return Op(f"adaptive_{kind}_pool", "conv", IMAGES, build, desc=f"adaptive {kind} pool")


def _upsample(ctx: Ctx, t: TensorState) -> TensorState:
    rank = SPATIAL_RANK[t.layout]
    mode = ctx.choice(["nearest", {1: "linear", 2: "bilinear", 3: "trilinear"}[rank]])
    align = "" if mode == "nearest" else ", align_corners=False"
    ctx.fwd(f'x = F.interpolate({t.var}, scale_factor=2, mode="{mode}"{align})')
    n, c, *spatial = t.shape
    out = (n, c, *[d.derive("{} * 2", lambda v: v * 2) for d in spatial])
    ctx.mem_cost(t.numel() * 2**rank, t.numel(), t.numel() * 2**rank, flops_per=4)
    return done(ctx, t, f"upsample[{mode}]", f"{mode} upsampling by 2", shape=out, sign=t.sign)


OPS = [
    _conv(1),
    _conv(2),
    _conv(3),
    _conv(1, transposed=True),
    _conv(2, transposed=True),
    _conv(3, transposed=True),
    _conv(2, depthwise=True),
    _conv(1, depthwise=True),
    _pool("max"),
    _pool("avg"),
    _pool("lp"),
    _adaptive("avg"),
    _adaptive("max"),
    Op("upsample", "conv", IMAGES, _upsample, desc="interpolate"),
]
