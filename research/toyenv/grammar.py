"""The plan language: a short token sequence saying which ops run, how they are grouped into Triton kernels
and how each kernel is tiled.

    plan     := kernel+
    kernel   := "K" op+ setting*
    op       := OPNAME [axis]                        axis only after a row/reduce op
    axis     := "ax1" (the last dim, default) | "ax0"
    setting  := B<n> | V<n> | W<n> | M0 | M1         elementwise kernels (no row/reduce op)
              | R<n> | W<n> | M0 | M1                row kernels (hold a row/reduce op)

``B`` elements per tile (32..4096), ``V`` vector width (1, 2, 4, 8: contiguous elements per tile row, the
tile is [B, V]), ``R`` rows per program of a row kernel (1..16), ``W`` warps (1..16), ``M1`` emit the tail
mask (``M0``: no tail handling; the kernel covers whole tiles only and its reductions include padding
lanes). Settings may come in any order, each at most once; missing ones take the defaults (B1024 V1 W4 M1,
R1 W4 M1). The canonical form (``format_plan``) writes every setting, in the order above, and omits the
default axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ops import MAP, TOY_OPS

KERNEL = "K"
AXES = {"ax1": 1, "ax0": 0}
BLOCKS = (32, 64, 128, 256, 512, 1024, 2048, 4096)
VECS = (1, 2, 4, 8)
WARPS = (1, 2, 4, 8, 16)
ROWS = (1, 2, 4, 8, 16)
MASKS = {"M1": True, "M0": False}
DEFAULT_BLOCK, DEFAULT_VEC, DEFAULT_WARPS, DEFAULT_ROWS = 1024, 1, 4, 1
MAX_KERNELS, MAX_OPS = 8, 12

SETTING_TOKENS = (
    *(f"B{b}" for b in BLOCKS),
    *(f"V{v}" for v in VECS),
    *(f"W{w}" for w in WARPS),
    *(f"R{r}" for r in ROWS),
    *MASKS,
)
PLAN_TOKENS: tuple[str, ...] = (KERNEL, *sorted(TOY_OPS), *AXES, *SETTING_TOKENS)


class PlanError(ValueError):
    """A token sequence that is not a plan (``position``: index of the offending token, or None)."""

    def __init__(self, message: str, position: int | None = None):
        super().__init__(message if position is None else f"token {position}: {message}")
        self.position = position


@dataclass(frozen=True)
class Step:
    op: str
    axis: int = 1  # row/reduce ops: 1 = last dim, 0 = first dim

    @property
    def kind(self) -> str:
        return TOY_OPS[self.op].kind


@dataclass(frozen=True)
class Kernel:
    steps: tuple[Step, ...]
    block: int | None = DEFAULT_BLOCK  # elementwise kernels only
    vec: int | None = DEFAULT_VEC  # elementwise kernels only
    rows: int | None = None  # row kernels only
    warps: int = DEFAULT_WARPS
    mask: bool = True

    @property
    def kind(self) -> str:
        return MAP if all(s.kind == MAP for s in self.steps) else "row"

    @staticmethod
    def make(steps, *, block=None, vec=None, rows=None, warps=DEFAULT_WARPS, mask=True) -> Kernel:
        """A kernel with the defaults of its kind filled in (and the other kind's settings None)."""
        steps = tuple(s if isinstance(s, Step) else Step(s) for s in steps)
        if all(s.kind == MAP for s in steps):
            return Kernel(steps, block or DEFAULT_BLOCK, vec or DEFAULT_VEC, None, warps, mask)
        return Kernel(steps, None, None, rows or DEFAULT_ROWS, warps, mask)


@dataclass(frozen=True)
class Plan:
    kernels: tuple[Kernel, ...]

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(s.op for k in self.kernels for s in k.steps)

    def tokens(self) -> list[str]:
        return format_plan(self)

    def text(self) -> str:
        return " ".join(format_plan(self))


def format_plan(plan: Plan) -> list[str]:
    """The canonical token sequence of a plan (``parse_plan(format_plan(p)) == p``)."""
    validate(plan)
    out: list[str] = []
    for k in plan.kernels:
        out.append(KERNEL)
        for s in k.steps:
            out.append(s.op)
            if s.kind != MAP and s.axis != 1:
                out.append(f"ax{s.axis}")
        if k.kind == MAP:
            out += [f"B{k.block}", f"V{k.vec}"]
        else:
            out.append(f"R{k.rows}")
        out += [f"W{k.warps}", "M1" if k.mask else "M0"]
    return out


def validate(plan: Plan) -> None:
    """Raise ``PlanError`` for a plan object that no token sequence could produce."""
    if not plan.kernels:
        raise PlanError("a plan has at least one kernel")
    if len(plan.kernels) > MAX_KERNELS or len(plan.ops) > MAX_OPS:
        raise PlanError(f"a plan has at most {MAX_KERNELS} kernels and {MAX_OPS} ops")
    for i, k in enumerate(plan.kernels):
        if not k.steps:
            raise PlanError(f"kernel {i} has no ops")
        for s in k.steps:
            if s.op not in TOY_OPS:
                raise PlanError(f"kernel {i}: unknown op {s.op!r}")
            if s.axis not in (0, 1) or (s.kind == MAP and s.axis != 1):
                raise PlanError(f"kernel {i}: {s.op} cannot take axis {s.axis}")
        if k.warps not in WARPS:
            raise PlanError(f"kernel {i}: warps {k.warps} not in {WARPS}")
        if k.kind == MAP:
            if k.block not in BLOCKS or k.vec not in VECS or k.rows is not None:
                raise PlanError(f"kernel {i}: elementwise kernels take a block in {BLOCKS} and vec in {VECS}")
        elif k.rows not in ROWS or k.block is not None or k.vec is not None:
            raise PlanError(f"kernel {i}: row kernels take rows in {ROWS} (no block or vec)")


_ALLOWED = {"B": BLOCKS, "V": VECS, "W": WARPS, "R": ROWS}


def _kernel(toks: list[tuple[int, str]]) -> Kernel:
    start = toks[0][0]
    steps: list[Step] = []
    settings: dict[str, tuple[int, str, object]] = {}
    after_axis = False
    for pos, tok in toks[1:]:
        if tok in TOY_OPS:
            if settings:
                raise PlanError(f"op {tok!r} after this kernel's settings: ops come first", pos)
            steps.append(Step(tok))
            after_axis = False
        elif tok in AXES:
            if not steps or settings:
                raise PlanError(f"axis {tok} must follow a row or reduce op", pos)
            if after_axis:
                raise PlanError(f"second axis {tok} for {steps[-1].op}", pos)
            if steps[-1].kind == MAP:
                raise PlanError(f"axis {tok} after {steps[-1].op}, which is elementwise", pos)
            steps[-1] = Step(steps[-1].op, AXES[tok])
            after_axis = True
        elif tok in SETTING_TOKENS:
            key = tok[0]
            if key in settings:
                raise PlanError(f"setting {tok} repeats {settings[key][1]} in one kernel", pos)
            if not steps:
                raise PlanError(f"setting {tok} before any op of the kernel", pos)
            value: object = MASKS[tok] if key == "M" else int(tok[1:])
            settings[key] = (pos, tok, value)
        elif tok[:1] in _ALLOWED and tok[1:].isdigit():
            raise PlanError(f"{tok}: {tok[0]} takes one of {_ALLOWED[tok[0]]}", pos)
        else:
            raise PlanError(f"unknown token {tok!r}", pos)
    if not steps:
        raise PlanError("kernel with no ops", start)
    row = any(s.kind != MAP for s in steps)
    for key, (pos, tok, _) in settings.items():
        if row and key in "BV":
            raise PlanError(f"{tok} applies to elementwise kernels; a kernel with a row op takes R<n>", pos)
        if not row and key == "R":
            raise PlanError(f"{tok} applies to row kernels; an elementwise kernel takes B<n> and V<n>", pos)
    get = {k: v for k, (_, _, v) in settings.items()}
    return Kernel.make(
        steps,
        block=get.get("B"),
        vec=get.get("V"),
        rows=get.get("R"),
        warps=get.get("W", DEFAULT_WARPS),
        mask=get.get("M", True),
    )


def parse_plan(tokens: str | list[str] | tuple[str, ...]) -> Plan:
    """A plan from its tokens (a list, or one string of space-separated tokens); ``PlanError`` otherwise."""
    toks = tokens.split() if isinstance(tokens, str) else list(tokens)
    if not toks:
        raise PlanError("empty plan")
    if toks[0] != KERNEL:
        raise PlanError(f"a plan starts with {KERNEL!r}, got {toks[0]!r}", 0)
    groups: list[list[tuple[int, str]]] = []
    for pos, tok in enumerate(toks):
        if not isinstance(tok, str):
            raise PlanError(f"tokens are strings, got {type(tok).__name__}", pos)
        if tok == KERNEL:
            groups.append([])
        groups[-1].append((pos, tok))
    if len(groups) > MAX_KERNELS:
        raise PlanError(f"{len(groups)} kernels; a plan has at most {MAX_KERNELS}", groups[MAX_KERNELS][0][0])
    plan = Plan(tuple(_kernel(g) for g in groups))
    if len(plan.ops) > MAX_OPS:
        raise PlanError(f"{len(plan.ops)} ops; a plan has at most {MAX_OPS}")
    return plan
