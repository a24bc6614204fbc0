"""Softmax variants and attention (category ``attention``)."""

from __future__ import annotations

from ._core import BYTES, FLOAT_LAYOUTS, HEADS, SEQ, Ctx, Op, TensorState
from ._helpers import channel_dim, done


def _softmax(name: str, template: str, desc: str, sign: str, bounded: bool, params=None) -> Op:
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        axis = channel_dim(t)
        dim = "1" if axis == 1 and t.rank > 2 else "-1"
        kw = {k: ctx.choice(v) for k, v in (params or {}).items()}
        ctx.fwd(f"x = {template.format(x=t.var, dim=dim, **kw)}")
        ctx.mem_cost(t.numel(), t.numel(), t.numel(), flops_per=6, kernels=1)
        return done(ctx, t, f"{name}[{dim}]", desc, sign=sign, bounded=bounded)

    return Op(name, "attention", FLOAT_LAYOUTS, build, desc=desc)


def _attn_cost(ctx: Ctx, b: int, h: int, s: int, t: int, d: int, kernels: int = 1) -> None:
    size = BYTES[ctx.dtype]
    ctx.cost(
        "attn", flops=4.0 * b * h * s * t * d, bytes=size * b * h * (2 * s * d + 2 * t * d), kernels=kernels
    )


def _sdpa(causal: bool = False, cross: bool = False):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        b, h, s, d = t.shape
        kv_len = ctx.dim("kv_len", "seq") if cross else s
        k = ctx.input("k", (b, h, kv_len, d))
        v = ctx.input("v", (b, h, kv_len, d))
        extra = ", is_causal=True" if causal else ""
        ctx.fwd(f"x = F.scaled_dot_product_attention({t.var}, {k}, {v}{extra})")
        _attn_cost(ctx, b.real, h.real, s.real, kv_len.real, d.real)
        name = "sdpa_causal" if causal else ("sdpa_cross" if cross else "sdpa")
        return done(
            ctx,
            t,
            name,
            f"{'causal ' if causal else ''}scaled dot-product attention",
            sign="any",
            bounded=True,
        )

    name = "sdpa_causal" if causal else ("sdpa_cross" if cross else "sdpa")
    return Op(name, "attention", frozenset({HEADS}), build, desc="SDPA", input_name="q")


def _manual_attention(ctx: Ctx, t: TensorState) -> TensorState:
    b, h, s, d = t.shape
    k = ctx.input("k", (b, h, s, d))
    v = ctx.input("v", (b, h, s, d))
    ctx.fwd(
        f"scores = torch.matmul({t.var}, {k}.transpose(-2, -1)) * {t.var}.shape[-1] ** -0.5",
        "attn = torch.softmax(scores, dim=-1)",
        f"x = torch.matmul(attn, {v})",
    )
    _attn_cost(ctx, b.real, h.real, s.real, s.real, d.real, kernels=4)
    ctx.mem_cost(b.real * h.real * s.real * s.real, *(b.real * h.real * s.real * s.real,) * 3)
    return done(
        ctx, t, "attention_manual", "attention written out (QK^T, softmax, PV)", sign="any", bounded=True
    )


def _self_sdpa(ctx: Ctx, t: TensorState) -> TensorState:
    b, s, d = t.shape
    ctx.fwd(f"x = F.scaled_dot_product_attention({t.var}, {t.var}, {t.var})")
    _attn_cost(ctx, b.real, 1, s.real, s.real, d.real)
    return done(ctx, t, "self_sdpa", "single-head self-attention", sign="any", bounded=True)


OPS = [
    _softmax("softmax", "torch.softmax({x}, dim={dim})", "softmax", "pos", True),
    _softmax("log_softmax", "torch.log_softmax({x}, dim={dim})", "log-softmax", "any", False),
    _softmax("softmin", "F.softmin({x}, dim={dim})", "softmin", "pos", True),
    _softmax(
        "softmax_temperature",
        "torch.softmax({x} / {temp}, dim={dim})",
        "softmax with temperature",
        "pos",
        True,
        params={"temp": [0.5, 2.0, 4.0]},
    ),
    _sdpa(),
    _sdpa(causal=True),
    _sdpa(cross=True),
    Op(
        "attention_manual",
        "attention",
        frozenset({HEADS}),
        _manual_attention,
        desc="attention",
        input_name="q",
    ),
    Op("self_sdpa", "attention", frozenset({SEQ}), _self_sdpa, desc="self attention"),
]
