"""Matrix products: Linear, matmul/bmm with a second input, einsum, bilinear (category ``matmul``)."""

from __future__ import annotations

from ._core import BYTES, SEQ, VEC, Ctx, Op, Reject, TensorState
from ._helpers import done

ROWS = frozenset({VEC, SEQ})


def _gemm_cost(ctx: Ctx, m: int, k: int, n: int, batch: int = 1) -> None:
    size = BYTES[ctx.dtype]
    ctx.cost("gemm", flops=2.0 * batch * m * k * n, bytes=size * batch * (m * k + k * n + m * n))


def _rows(t: TensorState) -> int:
    return t.numel() // t.shape[-1].real


def _gemm_done(ctx: Ctx, t: TensorState, k, n, name: str, desc: str, **kw) -> TensorState:
    """The end of a [.., k] x [k, n] product's build: its cost, then the op done with output [.., n]."""
    _gemm_cost(ctx, _rows(t), k.real, n.real)
    return done(ctx, t, name, desc, shape=(*t.shape[:-1], n), sign="any", **kw)


def _linear(bias: bool):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        k = t.shape[-1]
        n = ctx.dim("out_features", "features")
        fc = ctx.attr("fc" if bias else "proj")
        ctx.init(f"{fc} = nn.Linear({ctx.code(k)}, {n.expr}{'' if bias else ', bias=False'}{ctx.dk})")
        ctx.fwd(f"x = {fc}({t.var})")
        return _gemm_done(ctx, t, k, n, "linear" if bias else "linear_nobias", "a linear layer")

    return build


def _matmul_input(transposed: bool):
    def build(ctx: Ctx, t: TensorState) -> TensorState:
        k = t.shape[-1]
        n = ctx.dim("out_features", "features")
        if transposed:
            w = ctx.input("w", (n, k))
            ctx.fwd(f"x = torch.matmul({t.var}, {w}.t())")
        else:
            w = ctx.input("w", (k, n))
            ctx.fwd(f"x = torch.matmul({t.var}, {w})")
        name = "matmul_t" if transposed else "matmul"
        return _gemm_done(ctx, t, k, n, name, "a matrix product with a second input", bounded=False)

    return build


def _bmm(ctx: Ctx, t: TensorState) -> TensorState:
    b, s, k = t.shape
    n = ctx.dim("out_features", "features")
    y = ctx.input("y", (b, k, n))
    ctx.fwd(f"x = torch.bmm({t.var}, {y})")
    _gemm_cost(ctx, s.real, k.real, n.real, b.real)
    return done(ctx, t, "bmm", "a batched matrix product", shape=(b, s, n), sign="any", bounded=False)


def _gram(ctx: Ctx, t: TensorState) -> TensorState:
    b, s, k = t.shape
    ctx.fwd(f"x = torch.bmm({t.var}, {t.var}.transpose(1, 2))")
    _gemm_cost(ctx, s.real, k.real, s.real, b.real)
    return done(ctx, t, "gram", "a Gram matrix x @ x^T", shape=(b, s, s), sign="any", bounded=False)


def _einsum(ctx: Ctx, t: TensorState) -> TensorState:
    b, s, k = t.shape
    n = ctx.dim("out_features", "features")
    w = ctx.attr("weight")
    ctx.init(f"{w} = nn.Parameter(torch.randn({ctx.code(k)}, {n.expr}{ctx.dk}) / {ctx.code(k)} ** 0.5)")
    ctx.fwd(f'x = torch.einsum("bsk,kn->bsn", {t.var}, {w})')
    _gemm_cost(ctx, s.real, k.real, n.real, b.real)
    return done(ctx, t, "einsum", "an einsum contraction with a weight", shape=(b, s, n), sign="any")


def _addmm(ctx: Ctx, t: TensorState) -> TensorState:
    k = t.shape[-1]
    n = ctx.dim("out_features", "features")
    w, bias = ctx.attr("weight"), ctx.attr("bias")
    ctx.init(
        f"{w} = nn.Parameter(torch.randn({ctx.code(k)}, {n.expr}{ctx.dk}) / {ctx.code(k)} ** 0.5)",
        f"{bias} = nn.Parameter(torch.randn({n.expr}{ctx.dk}))",
    )
    ctx.fwd(f"x = torch.addmm({bias}, {t.var}, {w})")
    _gemm_cost(ctx, t.shape[0].real, k.real, n.real)
    return done(ctx, t, "addmm", "a fused bias + matrix product (addmm)", shape=(t.shape[0], n), sign="any")


def _bilinear(ctx: Ctx, t: TensorState) -> TensorState:
    b, k = t.shape
    if k.real > 2048:
        raise Reject("bilinear weights would be too large")
    k2 = ctx.dim("in_features2", "k")
    n = ctx.dim("out_features", "k")
    y = ctx.input("y", (b, k2))
    bl = ctx.attr("bilinear")
    ctx.init(f"{bl} = nn.Bilinear({ctx.code(k)}, {k2.expr}, {n.expr}{ctx.dk})")
    ctx.fwd(f"x = {bl}({t.var}, {y})")
    _gemm_cost(ctx, b.real, k.real * k2.real, n.real)
    return done(ctx, t, "bilinear", "a bilinear layer", shape=(b, n), sign="any")


OPS = [
    Op("linear", "matmul", ROWS, _linear(True), desc="Linear"),
    Op("linear_nobias", "matmul", ROWS, _linear(False), desc="Linear without bias"),
    Op("matmul", "matmul", ROWS, _matmul_input(False), desc="matmul"),
    Op("matmul_t", "matmul", ROWS, _matmul_input(True), desc="matmul with a transposed operand"),
    Op("bmm", "matmul", frozenset({SEQ}), _bmm, desc="bmm"),
    Op("gram", "matmul", frozenset({SEQ}), _gram, desc="Gram matrix"),
    Op("einsum", "matmul", frozenset({SEQ}), _einsum, desc="einsum"),
    Op("addmm", "matmul", frozenset({VEC}), _addmm, desc="addmm"),
    Op("bilinear", "matmul", frozenset({VEC}), _bilinear, desc="Bilinear"),
]
