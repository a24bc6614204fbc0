"""Correct Triton ``ModelNew`` source for a task's op chain, written from the reference itself: its
``__init__`` is copied verbatim (the judge's seed replay then gives both models the same parameters), and
each forward statement (one per library op) becomes one kernel launched in sequence, never fused.

Ops the templates do not cover, or a forward that is not one statement per op, raise :class:`Uncovered`
(the corpus skips and counts the task)."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from . import _kernels as K
from ._kernels import BLOCK, GEMM_TILE

HEADER = "import math\n\nimport torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
REDUCTIONS = frozenset(K.REDUCE)
SOFTMAXES = {"softmax": 1.0, "log_softmax": 1.0, "softmin": -1.0, "softmax_temperature": None}
NORMS = frozenset({"layer_norm", "layer_norm_noaffine", "rms_norm", "l2_normalize"})
GEMMS = frozenset({"linear", "linear_nobias", "matmul", "matmul_t", "addmm", "einsum", "bmm", "gram"})
COVERED = frozenset(K.UNARY) | set(K.BINARY) | set(K.CHANNEL) | REDUCTIONS | set(SOFTMAXES) | NORMS | GEMMS


class Uncovered(Exception):
    """No template writes this task (the message says why, its first word is the reason code)."""


@dataclass
class Solution:
    source: str
    ops: list[str]
    kernels: int  # kernel launches per forward, one per op


def _numbers(node: ast.AST) -> list[float]:
    """Numeric literals in source order (a unary minus folded in)."""
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    ):
        return [-node.operand.value] if isinstance(node.operand.value, (int, float)) else []
    if isinstance(node, ast.Constant):
        ok = isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        return [node.value] if ok else []
    return [v for child in ast.iter_child_nodes(node) for v in _numbers(child)]


def _kw(call: ast.Call, name: str):
    for k in call.keywords:
        if k.arg == name:
            return ast.literal_eval(k.value)
    return None


def _self_attr(node: ast.AST) -> str | None:
    """``self.foo`` anywhere in ``node`` (the first, in source order)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
            return n.attr
    return None


def _names(node: ast.AST) -> list[str]:
    return list(dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name)))


def _statements(fn: ast.FunctionDef) -> list[ast.expr]:
    """The forward's op expressions: ``x = <expr>`` lines and a final ``return <expr>`` (not ``return x``)."""
    out = []
    for st in fn.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            if st.targets[0].id != "x":
                raise Uncovered(f"multiline: a helper variable {st.targets[0].id!r} in the forward")
            out.append(st.value)
        elif isinstance(st, ast.Return) and st.value is not None:
            if not (isinstance(st.value, ast.Name) and st.value.id == "x"):
                out.append(st.value)
        else:
            raise Uncovered(f"statement: {type(st).__name__} in the forward")
    return out


class _Writer:
    """Collects the kernels and the forward lines of one solution."""

    def __init__(self):
        self.kernels: list[str] = []
        self.lines: list[str] = []

    def name(self, op: str) -> str:
        return f"k{len(self.kernels)}_{op}"

    def alloc(self, shape: str) -> None:
        self.lines.append(f"out = torch.empty({shape}, device=x.device, dtype=x.dtype)")

    def flat(self, op: str, expr: str, kind: str, args: str = "x, ", pre: tuple[str, ...] = ()) -> None:
        """``args``: the inputs before ``out``; a channel kernel also gets ``inner, C`` after ``n``."""
        name = self.name(op)
        self.kernels.append(K.flat_kernel(name, expr, kind))
        self.lines += [*pre, "n = x.numel()"]
        self.alloc("x.shape")
        tail = "n, inner, C" if kind == "channel" else "n"
        self.lines += [f"{name}[(triton.cdiv(n, {BLOCK}),)]({args}out, {tail}, BLOCK={BLOCK})", "x = out"]

    def rows(self, op: str, dims: str, out_shape: str, map_args: str | None = None) -> None:
        """A row kernel over the axes ``dims`` (a Python expression of a contiguous axis range)."""
        name = self.name(op)
        self.lines += [
            f"lo, hi = _axes({dims}, x.dim())",
            "R, inner = math.prod(x.shape[lo:hi + 1]), math.prod(x.shape[hi + 1:])",
        ]
        if map_args is None:
            self.kernels.append(K.reduce_kernel(name, op))
            self.alloc(out_shape)
            self.lines += [f"{name}[(x.numel() // R,)](x, out, R, inner, BLOCK={BLOCK})", "x = out"]
        else:
            self.kernels.append(K.rowmap_kernel(name, op))
            self.alloc("x.shape")
            self.lines += [f"{name}[(x.numel() // R,)](x, {map_args}, BLOCK={BLOCK})", "x = out"]

    def gemm(self, a: str, b: str, bias: str | None, m: str, n: str, k: str, batched: bool) -> None:
        """``a``/``b`` name (possibly strided) 2-D or, ``batched``, 3-D operands; the result replaces x."""
        name = self.name("gemm")
        self.kernels.append(K.gemm_kernel(name))
        t = GEMM_TILE
        self.lines += [f"a, b = {a}, {b}", f"M, N, K = {m}, {n}, {k}"]
        if batched:
            self.lines += [
                "out = torch.empty((a.shape[0], M, N), device=x.device, dtype=x.dtype)",
                "sa, sb, sc = a.stride(), b.stride(), out.stride()",
                f"grid = (triton.cdiv(M, {t}), triton.cdiv(N, {t}), a.shape[0])",
            ]
        else:
            self.lines += [
                "out = torch.empty((M, N), device=x.device, dtype=x.dtype)",
                "sa, sb, sc = (0, *a.stride()), (0, *b.stride()), (0, *out.stride())",
                f"grid = (triton.cdiv(M, {t}), triton.cdiv(N, {t}), 1)",
            ]
        bias_arg = bias or "out"
        self.lines += [
            f"{name}[grid](a, b, {bias_arg}, out, M, N, K, *sa, *sb, *sc, HAS_BIAS={bias is not None},",
            f"    BLOCK_M={t}, BLOCK_N={t}, BLOCK_K={t})",
        ]


def _op(w: _Writer, op: str, expr: ast.expr, current: tuple[str, ...]) -> None:
    """One op's kernel and launch; ``current``: the names the chain's tensor goes by in the reference."""
    nums = _numbers(expr)
    w.lines.append(f"# {op}: {ast.unparse(expr)}")
    if op in K.UNARY:
        w.flat(op, K.UNARY[op].format(*(repr(float(v)) for v in nums)), "unary")
    elif op in K.BINARY:
        other = [n for n in _names(expr) if n not in (*current, "torch", "F")]
        if len(other) != 1:
            raise Uncovered(f"parse: cannot tell the second input of {op}")
        w.flat(op, K.BINARY[op], "binary", f"x, {other[0]}, ")
    elif op in K.CHANNEL:
        attr = _self_attr(expr)
        if op == "prelu":  # channels are dim 1, unless the reference moves the last axis there
            p, inner = (
                f"self.{attr}.weight",
                "1" if "transpose" in ast.unparse(expr) else "math.prod(x.shape[2:])",
            )
        else:  # a parameter shaped (C, 1, ..., 1) broadcast against x's trailing axes
            p, inner = f"self.{attr}", "math.prod(x.shape[x.dim() - p.dim() + 1:])"
        w.flat(op, K.CHANNEL[op], "channel", "x, p, ", (f"p = {p}", "C = p.shape[0]", f"inner = {inner}"))
    elif op in REDUCTIONS:
        call = expr.value if isinstance(expr, ast.Attribute) else expr  # torch.max(...).values
        dims, keep = _kw(call, "dim"), bool(_kw(call, "keepdim"))
        if dims is None:
            raise Uncovered(f"parse: no dim= in {op}")
        keep_s = "True" if keep else "False"
        w.rows(op, repr(dims), f"_reduced(x.shape, {dims!r}, {keep_s})")
    elif op in SOFTMAXES:
        scale = SOFTMAXES[op]
        if scale is None:
            scale = 1.0 / float(nums[0])  # torch.softmax(x / T, dim=d): T comes first
        w.rows(
            op if op in K.ROWMAP else "softmax",
            repr(_kw(expr, "dim")),
            "",
            f"x, x, out, R, inner, {scale!r}, 0.0",
        )
    elif op in NORMS:
        _norm(w, op, expr)
    elif op in GEMMS:
        _gemm(w, op, expr, current)
    else:
        raise Uncovered(f"op: no template for {op}")


def _norm(w: _Writer, op: str, expr: ast.expr) -> None:
    attr = _self_attr(expr)
    if op == "layer_norm":
        m = f"self.{attr}"
        w.lines.append(f"D = {m}.weight.dim()")
        w.rows(op, "tuple(range(-D, 0))", "", f"{m}.weight, {m}.bias, out, R, inner, 1.0, {m}.eps")
    elif op == "layer_norm_noaffine":
        w.rows(op, "-1", "", "x, x, out, R, inner, 1.0, 1e-5")
    elif op == "rms_norm":
        m = f"self.{attr}"
        w.rows(op, "-1", "", f"{m}.weight, x, out, R, inner, 1.0, {m}.eps")
    else:
        w.rows(op, repr(_kw(expr, "dim")), "", "x, x, out, R, inner, 1.0, 1e-12")


def _gemm(w: _Writer, op: str, expr: ast.expr, current: tuple[str, ...]) -> None:
    attr = _self_attr(expr)
    args = expr.args if isinstance(expr, ast.Call) else []
    flat = "x.reshape(-1, x.shape[-1])"
    if op in ("linear", "linear_nobias"):
        m = f"self.{attr}"
        w.gemm(
            flat,
            f"{m}.weight.t()",
            f"{m}.bias" if op == "linear" else None,
            "a.shape[0]",
            "b.shape[1]",
            "a.shape[1]",
            False,
        )
    elif op in ("matmul", "matmul_t", "einsum"):
        other = f"self.{attr}" if op == "einsum" else _names(args[1])[0]
        b = f"{other}.t()" if op == "matmul_t" else other
        w.gemm(flat, b, None, "a.shape[0]", "b.shape[1]", "a.shape[1]", False)
    elif op == "addmm":
        bias, weight = ast.unparse(args[0]), ast.unparse(args[2])
        w.gemm("x", weight, bias, "a.shape[0]", "b.shape[1]", "a.shape[1]", False)
        w.lines.append("x = out")
        return
    elif op in ("bmm", "gram"):
        b = "x.transpose(1, 2)" if op == "gram" else _names(args[1])[0]
        w.gemm("x", b, None, "a.shape[1]", "b.shape[2]", "a.shape[2]", True)
        w.lines.append("x = out")
        return
    w.lines.append("x = out.reshape(*x.shape[:-1], N)")


HELPERS = '''

def _axes(dims, rank):
    """The contiguous axis range [lo, hi] that ``dims`` (an int or a tuple) names."""
    axes = sorted(d % rank for d in (dims if isinstance(dims, tuple) else (dims,)))
    if axes != list(range(axes[0], axes[-1] + 1)):
        raise ValueError(f"reduced axes {dims} are not contiguous")
    return axes[0], axes[-1]


def _reduced(shape, dims, keepdim):
    lo, hi = _axes(dims, len(shape))
    return (*shape[:lo], *([1] * (hi - lo + 1) if keepdim else []), *shape[hi + 1:])
'''


def write_solution(reference: str, ops: list[str]) -> Solution:
    """The unfused Triton solution of ``reference`` whose forward applies ``ops`` in order (any float dtype:
    kernels compute in float32 and store in the output's dtype)."""
    missing = [o for o in ops if o not in COVERED]
    if missing:
        raise Uncovered(f"op: no template for {missing[0]}")
    tree = ast.parse(reference)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise Uncovered("parse: no class Model")
    fns = {n.name: n for n in model.body if isinstance(n, ast.FunctionDef)}
    if "forward" not in fns:
        raise Uncovered("parse: Model has no forward")
    fwd = fns["forward"]
    exprs = _statements(fwd)
    if len(exprs) != len(ops):
        raise Uncovered(f"multiline: {len(exprs)} forward statements for {len(ops)} ops")
    w = _Writer()
    first = fwd.args.args[1].arg
    if first != "x":
        w.lines.append(f"x = {first}")
    for op, expr in zip(ops, exprs):
        _op(w, op, expr, ("x", first))
    init = "def __init__(self):\n    super().__init__()"
    if "__init__" in fns:  # verbatim, so that the judge's seed replay builds the same parameters
        node = fns["__init__"]
        init = textwrap.dedent(" " * node.col_offset + ast.get_source_segment(reference, node))
    args = ", ".join(a.arg for a in fwd.args.args)
    body = ["class ModelNew(nn.Module):"]
    body += [f"    {line}" if line else "" for line in init.splitlines()]
    body += (
        ["", f"    def forward({args}):"] + [f"        {line}" for line in w.lines] + ["        return x", ""]
    )
    parts = [HEADER, HELPERS, *("\n\n" + k for k in w.kernels), "\n\n" + "\n".join(body)]
    return Solution("".join(parts), list(ops), len(w.kernels))
