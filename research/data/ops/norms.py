"""Normalisations (category ``normalization``)."""

from __future__ import annotations

from ._core import HEADS, IMAGES, IMG1D, IMG2D, IMG3D, SEQ, SPATIAL_RANK, VEC, Ctx, Op, Reject, TensorState
from ._helpers import channel_dim, done

LAST = frozenset({VEC, SEQ, HEADS})


def _norm_cost(ctx: Ctx, t: TensorState, passes: int = 2) -> None:
    ctx.mem_cost(t.numel(), *(t.numel() for _ in range(passes)), flops_per=5)


def _layer_norm(ctx: Ctx, t: TensorState) -> TensorState:
    ln = ctx.attr("norm")
    if t.layout in IMAGES:
        ctx.init(f"{ln} = nn.LayerNorm([{ctx.shape_code(t.shape[1:])}]{ctx.dk})")
        sig = "layer_norm[chw]"
    else:
        ctx.init(f"{ln} = nn.LayerNorm({ctx.code(t.shape[-1])}{ctx.dk})")
        sig = "layer_norm[-1]"
    ctx.fwd(f"x = {ln}({t.var})")
    _norm_cost(ctx, t)
    return done(ctx, t, sig, "LayerNorm", sign="any", bounded=True)


def _layer_norm_plain(ctx: Ctx, t: TensorState) -> TensorState:
    ctx.fwd(f"x = F.layer_norm({t.var}, {t.var}.shape[-1:])")
    _norm_cost(ctx, t)
    return done(ctx, t, "layer_norm_noaffine", "layer normalisation without affine", sign="any", bounded=True)


def _batch_norm(ctx: Ctx, t: TensorState) -> TensorState:
    rank = {VEC: 1, IMG1D: 1, IMG2D: 2, IMG3D: 3}[t.layout]
    bn = ctx.attr("bn")
    ctx.init(f"{bn} = nn.BatchNorm{rank}d({ctx.code(t.shape[1])}{ctx.dk})")
    ctx.fwd(f"x = {bn}({t.var})")
    _norm_cost(ctx, t, 3)
    return done(ctx, t, f"batch_norm{rank}d", "batch normalisation", sign="any", bounded=True)


def _group_norm(ctx: Ctx, t: TensorState) -> TensorState:
    c = t.shape[1]
    groups = [g for g in (2, 4, 8, 16) if c.real % g == 0 and c.proxy % g == 0 and g < c.proxy]
    if not groups:
        raise Reject("no group count divides the channels at both sizes")
    g = ctx.hyper("num_groups", ctx.choice(groups))
    gn = ctx.attr("group_norm")
    ctx.init(f"{gn} = nn.GroupNorm({g.expr}, {ctx.code(c)}{ctx.dk})")
    ctx.fwd(f"x = {gn}({t.var})")
    _norm_cost(ctx, t)
    return done(ctx, t, "group_norm", "GroupNorm", sign="any", bounded=True)


# One build function per op (the op table's unit); what they share is already _norm_cost and done().
def _instance_norm(ctx: Ctx, t: TensorState) -> TensorState:
    rank = SPATIAL_RANK[t.layout]
    for which in ("real", "proxy"):
        if all(getattr(d, which) == 1 for d in t.shape[2:]):
            raise Reject("instance norm needs more than one spatial element")
    inorm = ctx.attr("instance_norm")
    ctx.init(f"{inorm} = nn.InstanceNorm{rank}d({ctx.code(t.shape[1])}, affine=True{ctx.dk})")
    ctx.fwd(f"x = {inorm}({t.var})")
    _norm_cost(ctx, t)
    return done(ctx, t, f"instance_norm{rank}d", "InstanceNorm", sign="any", bounded=True)


def _rms_norm(ctx: Ctx, t: TensorState) -> TensorState:
    rn = ctx.attr("rms_norm")
    ctx.init(f"{rn} = nn.RMSNorm({ctx.code(t.shape[-1])}, eps=1e-6{ctx.dk})")
    ctx.fwd(f"x = {rn}({t.var})")
    _norm_cost(ctx, t)
    return done(ctx, t, "rms_norm", "RMSNorm", sign="any", bounded=True)


def _lrn(ctx: Ctx, t: TensorState) -> TensorState:
    size = ctx.choice([3, 5])
    ctx.fwd(f"x = F.local_response_norm({t.var}, size={size})")
    _norm_cost(ctx, t, 3)
    return done(ctx, t, f"local_response_norm[{size}]", "local response normalisation", sign=t.sign)


def _l2_normalize(ctx: Ctx, t: TensorState) -> TensorState:
    axis = channel_dim(t)
    ctx.fwd(f"x = F.normalize({t.var}, p=2.0, dim={axis})")
    _norm_cost(ctx, t)
    return done(ctx, t, f"l2_normalize[{axis}]", "L2 normalisation", sign=t.sign, bounded=True)


OPS = [
    Op("layer_norm", "normalization", LAST | {IMG2D}, _layer_norm, desc="LayerNorm"),
    Op("layer_norm_noaffine", "normalization", LAST | IMAGES, _layer_norm_plain, desc="layer norm"),
    Op("batch_norm", "normalization", frozenset({VEC, IMG1D, IMG2D, IMG3D}), _batch_norm, desc="BatchNorm"),
    Op("group_norm", "normalization", IMAGES, _group_norm, desc="GroupNorm"),
    Op("instance_norm", "normalization", IMAGES, _instance_norm, desc="InstanceNorm"),
    Op("rms_norm", "normalization", LAST, _rms_norm, desc="RMSNorm"),
    Op("local_response_norm", "normalization", frozenset({IMG2D}), _lrn, desc="LRN"),
    Op("l2_normalize", "normalization", LAST | IMAGES, _l2_normalize, desc="L2 normalize"),
]
