"""Core types of the operator library: symbolic dims, tensor states, the build context and the op record.

A task is built by running op builders in sequence on a :class:`Ctx`. Every size is a :class:`Dim` that
carries three things at once: the Python expression that names it in the rendered source (a module-level
constant such as ``in_channels`` or a simple derived expression such as ``height // 2``), its real value
(the size the emitted task uses) and its proxy value (the small size the CPU filters run with). Shape
inference therefore runs on both sizes in one pass and a rule that fails on either rejects the op.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

FLOATS = frozenset({"float32", "float16", "bfloat16"})
FP32_ONLY = frozenset({"float32"})
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "bool": 1}

# Layouts name what the axes of the main tensor mean; ops declare which ones they accept.
VEC, ROW, SEQ, HEADS, IMG1D, IMG2D, IMG3D, TOKENS = (
    "vec",
    "row",
    "seq",
    "heads",
    "img1d",
    "img2d",
    "img3d",
    "tokens",
)
FLOAT_LAYOUTS = frozenset({VEC, SEQ, HEADS, IMG1D, IMG2D, IMG3D})
IMAGES = frozenset({IMG1D, IMG2D, IMG3D})
SPATIAL_RANK = {IMG1D: 1, IMG2D: 2, IMG3D: 3}


class Reject(Exception):
    """An op (or a whole candidate) does not fit: a shape/dtype/value rule failed. Never a bug."""


@dataclass(frozen=True)
class Dim:
    expr: str  # how the rendered source names this size
    real: int
    proxy: int
    depth: int = 0  # 0: a module-level constant; 1: one arithmetic step from constants; 2+: compound

    @property
    def named(self) -> bool:
        return self.depth == 0

    def derive(self, template: str, fn: Callable[[int], int]) -> Dim:
        """A dim computed from this one, e.g. ``d.derive("{} // 2", lambda v: v // 2)``."""
        inner = self.expr if self.depth == 0 else f"({self.expr})"
        out = Dim(template.format(inner), int(fn(self.real)), int(fn(self.proxy)), self.depth + 1)
        if out.real < 1 or out.proxy < 1:
            raise Reject(f"derived size {out.expr} is < 1 (real {out.real}, proxy {out.proxy})")
        return out


@dataclass(frozen=True)
class TensorState:
    """The main tensor flowing through the chain."""

    var: str
    shape: tuple[Dim, ...]
    dtype: str
    layout: str
    sign: str = "any"  # any | nonneg | pos  (value-domain rules: log needs pos, sqrt needs nonneg)
    bounded: bool = True  # magnitudes O(1): exp/pow/cumprod are only applied to bounded values

    def replace(self, **kw) -> TensorState:
        return dataclasses.replace(self, **kw)

    def numel(self, which: str = "real") -> int:
        return int(np.prod([getattr(d, which) for d in self.shape], dtype=np.int64)) if self.shape else 1

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Const:
    name: str
    real: int | float
    proxy: int | float
    kind: str  # batch | size | hyper


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple[Dim, ...]
    dtype: str
    gen: str  # randn | rand | randint:<expr> | mask | perm | probs


@dataclass
class Cost:
    kind: str  # mem | gemm | conv | attn
    flops: float
    bytes: float
    kernels: int
    dtype: str


# Real and proxy values offered for fresh sizes, by kind. Proxies are small and kept distinct inside one task
# so that a transposed shape rule cannot hide behind square proxy shapes.
REAL_SIZES = {
    "features": [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 8192],
    "hidden": [512, 1024, 2048, 4096],
    "channels": [8, 16, 32, 64, 96, 128, 256],
    "spatial2d": [32, 56, 64, 112, 128, 224, 256, 512],
    "spatial1d": [256, 512, 1024, 2048, 4096, 8192, 16384],
    "spatial3d": [16, 24, 32, 48, 64],
    "seq": [128, 256, 512, 1024, 2048, 4096],
    "head_dim": [32, 64, 128],
    "classes": [10, 100, 1000, 4096],
    "vocab": [1000, 4096, 32000],
    "k": [4, 8, 16, 32, 64],
}
PROXY_SIZES = {
    "features": [32, 48, 64, 80, 96],
    "hidden": [64, 96, 128],
    "channels": [4, 6, 8, 10, 12],
    "spatial2d": [16, 20, 24],
    "spatial1d": [64, 80, 96],
    "spatial3d": [8, 10, 12],
    "seq": [16, 24, 32],
    "head_dim": [8, 16],
    "classes": [5, 7, 11],
    "vocab": [50, 60],
    "k": [2, 3, 4],
}


@dataclass
class Ctx:
    """Collects what one task needs while its ops are built: constants, inputs, code lines, costs."""

    rng: np.random.Generator
    dtype: str = "float32"
    consts: dict[str, Const] = field(default_factory=dict)
    inputs: list[InputSpec] = field(default_factory=list)
    init_lines: list[str] = field(default_factory=list)
    forward_lines: list[str] = field(default_factory=list)
    costs: list[Cost] = field(default_factory=list)
    sig: list[str] = field(default_factory=list)
    descs: list[str] = field(default_factory=list)
    attrs: set[str] = field(default_factory=set)
    _used_proxies: set[int] = field(default_factory=set)

    def checkpoint(self):
        """Copies of everything an op builder may change, to roll back an op that does not fit."""
        return (
            dict(self.consts),
            list(self.inputs),
            list(self.init_lines),
            list(self.forward_lines),
            list(self.costs),
            list(self.sig),
            list(self.descs),
            set(self.attrs),
            set(self._used_proxies),
        )

    def restore(self, cp) -> None:
        (
            self.consts,
            self.inputs,
            self.init_lines,
            self.forward_lines,
            self.costs,
            self.sig,
            self.descs,
            self.attrs,
            self._used_proxies,
        ) = (type(v)(v) for v in cp)

    # --- names -------------------------------------------------------------------------------------------
    def _unique(self, base: str, taken) -> str:
        name, i = base, 2
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        return name

    def attr(self, base: str) -> str:
        name = self._unique(base, self.attrs | {"forward", "training"})
        self.attrs.add(name)
        return f"self.{name}"

    def var(self, base: str) -> str:
        return self._unique(base, {i.name for i in self.inputs} | set(self.consts))

    # --- sizes -------------------------------------------------------------------------------------------
    def dim(
        self, base: str, kind: str, *, real: int | None = None, proxy: int | None = None, multiple_of=1
    ) -> Dim:
        """A fresh module-level size constant (real value sampled by kind unless given)."""
        if real is None:
            choices = [v for v in REAL_SIZES[kind] if v % multiple_of == 0]
            real = int(self.rng.choice(choices))
        if proxy is None:
            options = [v for v in PROXY_SIZES[kind] if v % multiple_of == 0] or [multiple_of]
            fresh = [v for v in options if v not in self._used_proxies] or options
            proxy = int(self.rng.choice(fresh))
        self._used_proxies.add(proxy)
        name = self._unique(base, set(self.consts) | {i.name for i in self.inputs})
        self.consts[name] = Const(name, real, proxy, "batch" if base == "batch_size" else "size")
        return Dim(name, real, proxy)

    def hyper(self, base: str, value: int | float) -> Dim:
        """A structural constant (kernel size, heads): same value at real and proxy size."""
        name = self._unique(base, set(self.consts) | {i.name for i in self.inputs})
        self.consts[name] = Const(name, value, value, "hyper")
        return Dim(name, int(value), int(value))

    def code(self, dim: Dim) -> str:
        """The source text for a size the code must mention (constructor args, get_inputs shapes)."""
        if dim.depth > 1:
            raise Reject(f"size {dim.expr} is too derived to spell in natural source")
        return dim.expr

    def shape_code(self, shape: Sequence[Dim]) -> str:
        return ", ".join(self.code(d) for d in shape)

    # --- code --------------------------------------------------------------------------------------------
    @property
    def dk(self) -> str:
        """Factory kwargs that put parameters in the task dtype (nothing for the float32 default)."""
        return "" if self.dtype == "float32" else f", dtype=torch.{self.dtype}"

    def init(self, *lines: str) -> None:
        self.init_lines.extend(lines)

    def fwd(self, *lines: str) -> None:
        self.forward_lines.extend(lines)

    def input(self, base: str, shape: Sequence[Dim], dtype: str | None = None, gen: str = "randn") -> str:
        for d in shape:
            self.code(d)
        name = self.var(base)
        self.inputs.append(InputSpec(name, tuple(shape), dtype or self.dtype, gen))
        return name

    def cost(self, kind: str = "mem", *, flops: float = 0.0, bytes: float = 0.0, kernels: int = 1) -> None:
        self.costs.append(Cost(kind, float(flops), float(bytes), kernels, self.dtype))

    def mem_cost(self, *tensors_numel: int, flops_per: float = 1.0, kernels: int = 1) -> None:
        """Bandwidth-bound op touching tensors of these element counts (the first is the compute extent)."""
        size = BYTES.get(self.dtype, 4)
        self.cost("mem", flops=flops_per * tensors_numel[0], bytes=size * sum(tensors_numel), kernels=kernels)

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]


Builder = Callable[[Ctx, TensorState], TensorState]


@dataclass(frozen=True)
class Op:
    """One seed operator: where it applies (layouts, dtypes, value domain) and how to build it."""

    name: str
    category: str
    layouts: frozenset[str]
    build: Builder
    dtypes: frozenset[str] = FLOATS
    needs_sign: str = "any"  # any | nonneg | pos
    needs_bounded: bool = False
    terminal: bool = False  # output ends the chain (scalar losses, integer results)
    block: bool = False  # a transformer module: drawn by the mix's "modules" bucket only
    first_only: bool = False  # consumes a non-float input (token ids)
    desc: str = ""
    input_name: str = "x"  # name of the main forward input when this op comes first

    def accepts(self, t: TensorState) -> bool:
        if t.layout not in self.layouts or t.dtype not in self.dtypes:
            return False
        if self.needs_sign == "pos" and t.sign != "pos":
            return False
        if self.needs_sign == "nonneg" and t.sign == "any":
            return False
        return not (self.needs_bounded and not t.bounded)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def names_in(text: str) -> list[str]:
    return _IDENT.findall(text)
