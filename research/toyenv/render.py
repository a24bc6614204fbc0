"""Render a plan for a task into a Triton ``ModelNew`` source, deterministically (same inputs, same bytes).

Every kernel reads one tensor and writes a fresh one (``torch.empty_like`` / ``new_empty``: allocation only,
which the strict policy allows); fusion is what saves the memory traffic. ``ModelNew.__init__`` repeats the
reference's parameter definitions, so seed replay and state-dict copies give both models the same weights.

Binding: a plan op that needs the task's values (a constant such as ``scale``'s factor, a parameter tensor
such as ``add_bias``'s) takes those of the same op's k-th occurrence in the task for its own k-th occurrence;
a plan op with no such occurrence in the task is a ``RenderError`` (the plan invents a parameter). Ops
without values (relu, softmax, ...) apply wherever the plan puts them, so wrong or reordered ops render
and are judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from .grammar import Kernel, Plan, PlanError, parse_plan
from .ops import MAP, REDUCE, TOY_OPS, ToyOp
from .tasks import ToyTask

TWO_D, ROWS_1D, COLS_1D = "2d", "rows", "cols"
HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"


class RenderError(PlanError):
    """A well-formed plan that does not apply to the task (invented parameters, impossible shapes)."""


@dataclass(frozen=True)
class _Bound:
    op: ToyOp
    axis: int
    values: dict[str, float]
    param: str | None  # ModelNew expression of the parameter tensor, e.g. "self.bias"


def _bind(task: ToyTask, plan: Plan) -> list[list[_Bound]]:
    seen: dict[str, int] = {}
    out = []
    for i, k in enumerate(plan.kernels):
        group = []
        for s in k.steps:
            op = TOY_OPS[s.op]
            n = seen.get(s.op, 0)
            seen[s.op] = n + 1
            values: dict[str, float] = {}
            param = None
            if op.bound:
                matches = [c for c in task.calls if c.name == s.op]
                if n >= len(matches):
                    have = f"{len(matches)} {s.op} op{'s' if len(matches) != 1 else ''}"
                    raise RenderError(f"kernel {i}: occurrence {n + 1} of {s.op}, but the task has {have}")
                call = matches[n]
                values = dict(zip(op.params, call.params))
                param = f"self.{call.attr}{op.tensor_suffix}" if op.tensor else None
            group.append(_Bound(op, s.axis, values, param))
        out.append(group)
    return out


def _check_shapes(bound: list[list[_Bound]]) -> list[tuple[str, str, int]]:
    """(input shape, output shape, axis) of each kernel; RenderError where a kernel cannot apply."""
    shape = TWO_D
    out = []
    for i, group in enumerate(bound):
        start, axis, reduced = shape, 1, False
        row_axes = {b.axis for b in group if b.op.kind != MAP}
        if len(row_axes) > 1:
            raise RenderError(f"kernel {i}: one kernel reduces along one axis, got axes {sorted(row_axes)}")
        if row_axes:
            axis = row_axes.pop()
            if shape != TWO_D:
                raise RenderError(f"kernel {i}: a row op needs the 2-D tensor, its input is 1-D")
        for b in group:
            if reduced and b.op.kind != MAP:
                raise RenderError(f"kernel {i}: {b.op.name} after a reduction in the same kernel")
            if b.param is not None and (reduced or shape != TWO_D):
                raise RenderError(f"kernel {i}: {b.op.name} needs the 2-D tensor, it gets a 1-D one")
            if b.op.kind == REDUCE:
                reduced = True
                shape = ROWS_1D if axis == 1 else COLS_1D
        out.append((start, shape, axis))
    return out


def _map_kernel(name: str, k: Kernel, group: list[_Bound]) -> list[str]:
    params = [f"p{j}_ptr" for j, b in enumerate(group) if b.param]
    vec = k.vec > 1
    sig = ", ".join(["in_ptr", "out_ptr", *params, "n", "n_cols", "BLOCK: tl.constexpr"])
    if vec:
        sig += ", VEC: tl.constexpr"
    lines = ["@triton.jit", f"def {name}({sig}):", "    pid = tl.program_id(0)"]
    if vec:
        lines.append(
            "    offs = pid * (BLOCK * VEC) + tl.arange(0, BLOCK)[:, None] * VEC + tl.arange(0, VEC)[None, :]"
        )
    else:
        lines.append("    offs = pid * BLOCK + tl.arange(0, BLOCK)")
    m = ", mask=mask, other=0.0" if k.mask else ""
    if k.mask:
        lines.append("    mask = offs < n")
    lines.append(f"    x = tl.load(in_ptr + offs{m})")
    for j, b in enumerate(group):
        p = None
        if b.param:
            p = f"p{j}"
            lines.append(f"    {p} = tl.load(p{j}_ptr + offs % n_cols{m})")
        lines.append(f"    x = {b.op.expr('x', b.values, p)}")
    lines.append(f"    tl.store(out_ptr + offs, x{', mask=mask' if k.mask else ''})")
    return lines


def _row_kernel(name: str, k: Kernel, group: list[_Bound]) -> list[str]:
    params = [f"p{j}_ptr" for j, b in enumerate(group) if b.param]
    sig = ", ".join(
        ["in_ptr", "out_ptr", *params, "n_outer", "n_inner", "s_outer", "s_inner", "n_cols"]
        + ["ROWS: tl.constexpr", "BLOCK_D: tl.constexpr"]
    )
    lines = [
        "@triton.jit",
        f"def {name}({sig}):",
        "    pid = tl.program_id(0)",
        "    r = pid * ROWS + tl.arange(0, ROWS)[:, None]",
        "    c = tl.arange(0, BLOCK_D)[None, :]",
        "    offs = r * s_outer + c * s_inner",
        # without the tail mask the grid covers whole row tiles only and reductions see the padding lanes;
        # loads stay inside the row (a Triton tile is a power of two wide, the row need not be)
        "    mask = (r < n_outer) & (c < n_inner)" if k.mask else "    mask = c < n_inner",
        "    x = tl.load(in_ptr + offs, mask=mask, other=0.0)",
    ]
    reduced = False
    for j, b in enumerate(group):
        p = None
        if b.param:
            p = f"p{j}"
            lines.append(f"    {p} = tl.load(p{j}_ptr + offs % n_cols, mask=mask, other=0.0)")
        if b.op.kind == MAP:
            lines.append(f"    x = {b.op.expr('x', b.values, p)}")
        else:
            lines += [f"    {s}" for s in b.op.body("x", b.values, p, k.mask)]
            reduced = reduced or b.op.kind == REDUCE
    if reduced:
        lines.append(f"    tl.store(out_ptr + r, x{', mask=r < n_outer' if k.mask else ''})")
    else:
        lines.append("    tl.store(out_ptr + offs, x, mask=mask)")
    return lines


def _alloc(shape: str, src: str) -> str:
    if shape == TWO_D:
        return f"torch.empty_like({src})"
    return "x.new_empty((n_rows,))" if shape == ROWS_1D else "x.new_empty((n_cols,))"


def render_plan(task: ToyTask, plan: Plan | str | list[str]) -> str:
    """The ``ModelNew`` source of a plan for a task; ``PlanError``/``RenderError`` when it cannot be."""
    plan = plan if isinstance(plan, Plan) else parse_plan(plan)
    bound = _bind(task, plan)
    shapes = _check_shapes(bound)
    kernels: list[str] = []
    body = ["x = x.contiguous()", "n_rows, n_cols = x.shape"]
    cur = "x"
    for i, (k, group, (_, end, axis)) in enumerate(zip(plan.kernels, bound, shapes)):
        name = f"_k{i}_{'_'.join(b.op.name for b in group)}"[:60]
        params = [b.param for b in group if b.param]
        out = f"t{i}"
        body.append(f"{out} = {_alloc(end, cur)}")
        if k.kind == MAP:
            kernels += [*_map_kernel(name, k, group), "", ""]
            tile = k.block * k.vec
            grid = f"triton.cdiv({cur}.numel(), {tile})" if k.mask else f"{cur}.numel() // {tile}"
            extra = f", VEC={k.vec}" if k.vec > 1 else ""
            args = [cur, out, *params, f"{cur}.numel()", "n_cols"]
            consts = f"BLOCK={k.block}{extra}, num_warps={k.warps}"
        else:
            kernels += [*_row_kernel(name, k, group), "", ""]
            outer, inner = ("n_rows", "n_cols") if axis == 1 else ("n_cols", "n_rows")
            strides = ("n_cols", "1") if axis == 1 else ("1", "n_cols")
            grid = f"triton.cdiv({outer}, {k.rows})" if k.mask else f"{outer} // {k.rows}"
            args = [cur, out, *params, outer, inner, *strides, "n_cols"]
            consts = f"ROWS={k.rows}, BLOCK_D=triton.next_power_of_2({inner}), num_warps={k.warps}"
        body.append(f"{name}[({grid},)]({', '.join(args)}, {consts})")
        cur = out
    body.append(f"return {cur}")
    init_args = "".join(f", {a}" for a in task.init_args)
    lines = [
        f'"""Triton ModelNew rendered from the plan: {plan.text()}"""',
        "",
        HEADER,
        "",
        *kernels,
        "class ModelNew(nn.Module):",
        f"    def __init__(self{init_args}):",
        "        super().__init__()",
        *(f"        {line}" for line in task.init_lines),
        "",
        "    def forward(self, x):",
        *(f"        {line}" for line in body),
        "",
    ]
    return "\n".join(lines)
