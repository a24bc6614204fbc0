"""The toy operator set: a subset of ``research.data``'s library over a 2-D float32 tensor (rows, cols), with
what a Triton kernel computes for each op.

Three kinds: ``map`` ops are elementwise (some with scalar constants, some with a per-column parameter
tensor), ``row`` ops normalise along one axis and keep the shape (softmax family, normalisations),
``reduce`` ops reduce one axis away (sum, mean, amax, logsumexp). The reference's constants are parsed
back from the line the library op emitted, so the judge's reference and the kernel's constants cannot drift.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from research.data.ops import LIBRARY

MAP, ROW, REDUCE = "map", "row", "reduce"
NEG_INF = 'float("-inf")'

_LITERAL = re.compile(r"(?<![\w.])-?\d+(?:\.\d*)?(?:[eE]-?\d+)?")
_ATTR = re.compile(r"self\.(\w+)")


@dataclass(frozen=True)
class ToyOp:
    """One toy op. ``params``: names of scalar constants, read from the emitted line's numeric literals at
    ``literal_index``; ``tensor``: the op reads a per-column parameter tensor ``self.<attr>`` (or its
    ``.weight`` for an ``nn`` module, ``tensor_suffix``)."""

    name: str
    kind: str
    params: tuple[str, ...] = ()
    literal_index: tuple[int, ...] = ()
    tensor: bool = False
    tensor_suffix: str = ""
    expr: Callable[..., str] | None = None  # map ops: (x, params, p) -> Triton expression
    body: Callable[..., list[str]] | None = None  # row/reduce ops: (x, params, p, masked) -> statements

    @property
    def category(self) -> str:
        return LIBRARY[self.name].category

    @property
    def bound(self) -> bool:
        """Whether the op needs the task's values (constants or a parameter tensor) to be rendered."""
        return bool(self.params) or self.tensor

    def parse(self, forward_line: str) -> tuple[tuple[float, ...], str | None]:
        """(scalar constants, parameter attribute) of one ``x = ...`` line the library emitted."""
        rhs = forward_line.split("=", 1)[1]
        literals = [float(v) for v in _LITERAL.findall(rhs)]
        try:
            values = tuple(literals[i] for i in self.literal_index)
        except IndexError:
            msg = f"{self.name}: cannot read constants {self.params} from {forward_line!r}"
            raise ValueError(msg) from None
        attr = None
        if self.tensor:
            found = _ATTR.findall(rhs)
            if not found:
                raise ValueError(f"{self.name}: no parameter attribute in {forward_line!r}")
            attr = found[0]
        return values, attr


def _f(v: float) -> str:
    return repr(float(v))


def _where(masked: bool, value: str, neutral: str) -> str:
    """A reduction operand; with the tail mask the padding lanes hold the reduction's neutral value."""
    return f"tl.where(mask, {value}, {neutral})" if masked else value


def _softmax(x: str, pv: dict, p: str | None, masked: bool, log: bool = False, temp: bool = False):
    src = f"{x} / {_f(pv['temp'])}" if temp else x
    lines = [
        f"{x} = {src}" if temp else None,
        f"m = tl.max({_where(masked, x, NEG_INF)}, axis=1)[:, None]",
        f"e = {_where(masked, f'tl.exp({x} - m)', '0.0')}",
        "s = tl.sum(e, axis=1)[:, None]",
        f"{x} = {x} - m - tl.log(s)" if log else f"{x} = e / s",
    ]
    return [line for line in lines if line]


def _rms_norm(x: str, pv: dict, p: str | None, masked: bool):
    return [
        f"ms = tl.sum({_where(masked, f'{x} * {x}', '0.0')}, axis=1)[:, None] / n_inner",
        f"{x} = {x} * tl.rsqrt(ms + 1e-06) * {p}",
    ]


def _layer_norm(x: str, pv: dict, p: str | None, masked: bool):
    return [
        f"mu = tl.sum({_where(masked, x, '0.0')}, axis=1)[:, None] / n_inner",
        f"d = {_where(masked, f'{x} - mu', '0.0')}",
        "var = tl.sum(d * d, axis=1)[:, None] / n_inner",
        f"{x} = ({x} - mu) * tl.rsqrt(var + 1e-05)",
    ]


def _l2_normalize(x: str, pv: dict, p: str | None, masked: bool):
    return [
        f"nrm = tl.sqrt(tl.sum({_where(masked, f'{x} * {x}', '0.0')}, axis=1)[:, None])",
        f"{x} = {x} / tl.maximum(nrm, 1e-12)",
    ]


def _reduce(kind: str):
    def body(x: str, pv: dict, p: str | None, masked: bool):
        if kind in ("sum", "mean"):
            div = " / n_inner" if kind == "mean" else ""
            return [f"{x} = tl.sum({_where(masked, x, '0.0')}, axis=1)[:, None]{div}"]
        if kind == "amax":
            return [f"{x} = tl.max({_where(masked, x, NEG_INF)}, axis=1)[:, None]"]
        return [  # logsumexp
            f"m = tl.max({_where(masked, x, NEG_INF)}, axis=1)[:, None]",
            f"s = tl.sum({_where(masked, f'tl.exp({x} - m)', '0.0')}, axis=1)[:, None]",
            f"{x} = m + tl.log(s)",
        ]

    return body


def _map(name: str, expr, params=(), index=(), tensor=False) -> ToyOp:
    return ToyOp(name, MAP, tuple(params), tuple(index), tensor, "", expr)


TOY_OPS: dict[str, ToyOp] = {
    op.name: op
    for op in (
        _map("relu", lambda x, pv, p: f"tl.maximum({x}, 0.0)"),
        _map("gelu", lambda x, pv, p: f"0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))"),
        _map("silu", lambda x, pv, p: f"{x} * tl.sigmoid({x})"),
        _map("sigmoid", lambda x, pv, p: f"tl.sigmoid({x})"),
        _map("tanh", lambda x, pv, p: f"2.0 * tl.sigmoid(2.0 * {x}) - 1.0"),
        _map("abs", lambda x, pv, p: f"tl.abs({x})"),
        _map("square", lambda x, pv, p: f"{x} * {x}"),
        _map("softplus", lambda x, pv, p: f"tl.where({x} > 20.0, {x}, tl.log(1.0 + tl.exp({x})))"),
        _map(
            "leaky_relu",
            lambda x, pv, p: f"tl.where({x} > 0.0, {x}, {x} * {_f(pv['slope'])})",
            ("slope",),
            (0,),
        ),
        _map("scale", lambda x, pv, p: f"{x} * {_f(pv['s'])}", ("s",), (0,)),
        _map(
            "clamp",
            lambda x, pv, p: f"tl.minimum(tl.maximum({x}, {_f(pv['lo'])}), {_f(pv['hi'])})",
            ("lo", "hi"),
            (0, 1),
        ),
        _map(
            "hardtanh",
            lambda x, pv, p: f"tl.minimum(tl.maximum({x}, {_f(pv['lo'])}), {_f(pv['hi'])})",
            ("lo", "hi"),
            (0, 1),
        ),
        _map("add_bias", lambda x, pv, p: f"{x} + {p}", tensor=True),
        _map("mul_scale", lambda x, pv, p: f"{x} * {p}", tensor=True),
        _map("gate", lambda x, pv, p: f"{x} * tl.sigmoid({p})", tensor=True),
        ToyOp("softmax", ROW, body=_softmax),
        ToyOp("log_softmax", ROW, body=lambda x, pv, p, m: _softmax(x, pv, p, m, log=True)),
        ToyOp(
            "softmax_temperature",
            ROW,
            ("temp",),
            (0,),
            body=lambda x, pv, p, m: _softmax(x, pv, p, m, temp=True),
        ),
        ToyOp("rms_norm", ROW, tensor=True, tensor_suffix=".weight", body=_rms_norm),
        ToyOp("layer_norm_noaffine", ROW, body=_layer_norm),
        ToyOp("l2_normalize", ROW, body=_l2_normalize),
        ToyOp("sum", REDUCE, body=_reduce("sum")),
        ToyOp("mean", REDUCE, body=_reduce("mean")),
        ToyOp("amax", REDUCE, body=_reduce("amax")),
        ToyOp("logsumexp", REDUCE, body=_reduce("logsumexp")),
    )
}

for _op in TOY_OPS.values():  # the toy set is a subset of the library, by construction
    if _op.name not in LIBRARY:
        raise RuntimeError(f"toy op {_op.name!r} is not in research.data's library")

TOY_CATEGORIES = tuple(dict.fromkeys(op.category for op in TOY_OPS.values()))


def toy_op(name: str) -> ToyOp:
    if name not in TOY_OPS:
        raise KeyError(f"unknown toy op {name!r}; known: {sorted(TOY_OPS)}")
    return TOY_OPS[name]
