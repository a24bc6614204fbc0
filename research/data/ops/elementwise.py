"""Elementwise maps and activations (category ``elementwise``)."""

from __future__ import annotations

from ._core import FLOAT_LAYOUTS, ROW, Ctx, Op, TensorState
from ._helpers import channel_dim, done, param_shape, unary

ANY = FLOAT_LAYOUTS | {ROW}


def _param_op(name: str, attr: str, desc: str, apply: str) -> Op:
    """x combined with a learned per-channel parameter (bias add, scale, PReLU-like gates)."""

    def build(ctx: Ctx, t: TensorState) -> TensorState:
        p = ctx.attr(attr)
        ctx.init(f"{p} = nn.Parameter(torch.randn({param_shape(ctx, t)}{ctx.dk}))")
        ctx.fwd(f"x = {apply.format(x=t.var, p=p)}")
        ctx.mem_cost(t.numel(), t.numel())
        return done(ctx, t, name, desc, sign="any")

    return Op(name, "elementwise", FLOAT_LAYOUTS, build, desc=desc)


def _binary_input(name: str, desc: str, template: str, gen: str = "randn", sign: str = "any") -> Op:
    """x combined with a second forward input of the same shape."""

    def build(ctx: Ctx, t: TensorState) -> TensorState:
        y = ctx.input("y", t.shape, gen=gen)
        ctx.fwd(f"x = {template.format(x=t.var, y=y)}")
        ctx.mem_cost(t.numel(), t.numel(), t.numel())
        return done(ctx, t, name, desc, sign=sign)

    return Op(name, "elementwise", ANY - {ROW}, build, desc=desc)


def _prelu(ctx: Ctx, t: TensorState) -> TensorState:
    c = ctx.code(t.shape[channel_dim(t)])
    p = ctx.attr("prelu")
    ctx.init(f"{p} = nn.PReLU({c}{ctx.dk})")
    if t.layout in ("seq", "heads"):  # nn.PReLU's channel axis is dim 1; move features there and back
        ctx.fwd(f"x = {p}({t.var}.transpose(1, -1)).transpose(1, -1)")
    else:
        ctx.fwd(f"x = {p}({t.var})")
    ctx.mem_cost(t.numel(), t.numel())
    return done(ctx, t, "prelu", "PReLU")


OPS = [
    unary("relu", "torch.relu({x})", "ReLU", sign="nonneg", layouts=ANY),
    unary("gelu", "F.gelu({x})", "GELU", layouts=ANY),
    unary("gelu_tanh", 'F.gelu({x}, approximate="tanh")', "GELU (tanh approximation)"),
    unary("silu", "F.silu({x})", "SiLU", layouts=ANY),
    unary("sigmoid", "torch.sigmoid({x})", "sigmoid", sign="pos", bounded=True, layouts=ANY),
    unary("tanh", "torch.tanh({x})", "tanh", bounded=True, layouts=ANY),
    unary("leaky_relu", "F.leaky_relu({x}, negative_slope={s})", "LeakyReLU", params={"s": [0.01, 0.1, 0.2]}),
    unary("elu", "F.elu({x}, alpha={a})", "ELU", params={"a": [1.0, 0.5]}),
    unary("selu", "F.selu({x})", "SELU"),
    unary("celu", "F.celu({x}, alpha={a})", "CELU", params={"a": [1.0, 2.0]}),
    unary("softplus", "F.softplus({x})", "softplus", sign="pos", layouts=ANY),
    unary("softsign", "F.softsign({x})", "softsign", bounded=True),
    unary("hardswish", "F.hardswish({x})", "hardswish"),
    unary("hardsigmoid", "F.hardsigmoid({x})", "hardsigmoid", sign="nonneg", bounded=True),
    unary(
        "hardtanh",
        "F.hardtanh({x}, min_val=-{m}, max_val={m})",
        "hardtanh",
        params={"m": [0.5, 1.0, 2.0]},
        bounded=True,
    ),
    unary("mish", "F.mish({x})", "Mish"),
    unary("relu6", "F.relu6({x})", "ReLU6", sign="nonneg", bounded=True),
    unary("logsigmoid", "F.logsigmoid({x})", "log-sigmoid"),
    unary("tanhshrink", "F.tanhshrink({x})", "tanhshrink"),
    unary("softshrink", "F.softshrink({x}, lambd={l})", "softshrink", params={"l": [0.1, 0.5]}),
    unary("hardshrink", "F.hardshrink({x}, lambd={l})", "hardshrink", params={"l": [0.1, 0.5]}),
    unary("abs", "torch.abs({x})", "absolute value", sign="nonneg", layouts=ANY),
    unary("square", "torch.square({x})", "square", sign="nonneg", needs_bounded=True, layouts=ANY),
    unary("exp", "torch.exp({x})", "exp", sign="pos", bounded=False, needs_bounded=True),
    unary("log", "torch.log({x})", "natural log", needs_sign="pos", bounded=False),
    unary("sqrt", "torch.sqrt({x})", "square root", sign="nonneg", needs_sign="nonneg", layouts=ANY),
    unary(
        "rsqrt",
        "torch.rsqrt({x} + {e})",
        "reciprocal square root",
        params={"e": [1e-3, 1e-2]},
        sign="pos",
        needs_sign="nonneg",
        bounded=False,
    ),
    unary("log1p", "torch.log1p({x})", "log1p", sign="nonneg", needs_sign="nonneg"),
    unary("sin", "torch.sin({x})", "sine", bounded=True, flops=8),
    unary("cos", "torch.cos({x})", "cosine", bounded=True, flops=8),
    unary("erf", "torch.erf({x})", "erf", bounded=True, flops=8),
    unary(
        "clamp",
        "torch.clamp({x}, min={lo}, max={hi})",
        "clamp",
        params={"lo": [-1.0, -0.5, 0.0], "hi": [0.5, 1.0, 2.0]},
        bounded=True,
    ),
    unary(
        "scale",
        "{x} * {s}",
        "scaling by a constant",
        params={"s": [0.5, 2.0, 0.125, 1.5]},
        sign=None,
        layouts=ANY,
    ),
    unary("cube", "{x} ** 3", "cube", needs_bounded=True, bounded=False),
    unary(
        "reciprocal",
        "1.0 / ({x} + {e})",
        "reciprocal",
        params={"e": [1.0, 0.5]},
        sign="pos",
        needs_sign="nonneg",
        bounded=True,
    ),
    unary(
        "threshold", "F.threshold({x}, {th}, {v})", "threshold", params={"th": [0.1, 0.5], "v": [0.0, -1.0]}
    ),
    unary("swish_beta", "{x} * torch.sigmoid({b} * {x})", "swish", params={"b": [1.702, 2.0]}),
    _param_op("add_bias", "bias", "adding a learned bias", "{x} + {p}"),
    _param_op("mul_scale", "scale", "multiplying by a learned scale", "{x} * {p}"),
    _param_op("gate", "gate", "a learned sigmoid gate", "{x} * torch.sigmoid({p})"),
    Op("prelu", "elementwise", FLOAT_LAYOUTS, _prelu, desc="PReLU"),
    _binary_input("add_input", "adding a second input", "{x} + {y}"),
    _binary_input("mul_input", "multiplying by a second input", "{x} * {y}"),
    _binary_input("maximum_input", "elementwise maximum with a second input", "torch.maximum({x}, {y})"),
    _binary_input("lerp_input", "interpolating towards a second input", "torch.lerp({x}, {y}, 0.3)"),
]
