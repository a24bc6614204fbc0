"""Render a composed program as KernelBench-format source: ``class Model``, module-level size constants,
``get_inputs()`` and ``get_init_inputs()``, written the way a person would write the reference."""

from __future__ import annotations

from .ops._core import InputSpec, names_in

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _tuple(shape_code: str, n: int) -> str:
    return f"({shape_code},)" if n == 1 else f"({shape_code})"


def input_expr(spec: InputSpec, consts: set[str]) -> str:
    dims = ", ".join(d.expr for d in spec.shape)
    dk = "" if spec.dtype in ("float32", "int64", "bool") else f", dtype=torch.{spec.dtype}"
    to = "" if spec.dtype == "float32" else f".to(torch.{spec.dtype})"
    gen = spec.gen
    if gen == "randn":
        return f"torch.randn({dims}{dk})"
    if gen == "rand":
        return f"torch.rand({dims}{dk})"
    if gen.startswith("randint:"):
        return f"torch.randint(0, {gen.split(':', 1)[1]}, {_tuple(dims, len(spec.shape))})"
    if gen == "sign":
        return f"(torch.randint(0, 2, {_tuple(dims, len(spec.shape))}) * 2 - 1){to or '.float()'}"
    if gen == "probs":
        return f"torch.softmax(torch.randn({dims}{dk}), dim=-1)"
    if gen == "mask":
        return f"torch.rand({dims}) > 0.5"
    if gen == "perm":
        return f"torch.argsort(torch.rand({dims}), dim=-1)"
    raise ValueError(f"unknown input generator {gen!r}")


def describe(descs: list[str]) -> str:
    if not descs:
        return "Identity."
    text = descs[0][0].upper() + descs[0][1:]
    if len(descs) > 1:
        text += ", then " + ", then ".join(descs[1:])
    return text + "."


def render(program) -> str:
    ctx = program.ctx
    consts = list(ctx.consts.values())
    const_names = {c.name for c in consts}
    init_used = {n for line in ctx.init_lines for n in names_in(line)}
    init_args = [c.name for c in consts if c.name in init_used]
    params = "".join(f", {a}" for a in init_args)
    lines = [HEADER, "", "class Model(nn.Module):", f'    """{describe(ctx.descs)}"""', ""]
    lines += [f"    def __init__(self{params}):", "        super().__init__()"]
    lines += [f"        {line}" for line in ctx.init_lines]
    lines += ["", f"    def forward(self, {', '.join(i.name for i in ctx.inputs)}):"]
    body = list(ctx.forward_lines)
    if len(body) == 1 and body[0].startswith("x = "):
        lines.append(f"        return {body[0][4:]}")
    else:
        lines += [f"        {line}" for line in body] + ["        return x"]
    lines += ["", ""]
    lines += [f"{c.name} = {c.real}" for c in consts]
    lines += ["", "", "def get_inputs():"]
    exprs = [input_expr(i, const_names) for i in ctx.inputs]
    if len(exprs) == 1:
        lines.append(f"    return [{exprs[0]}]")
    else:
        lines += [f"    {i.name} = {e}" for i, e in zip(ctx.inputs, exprs)]
        lines.append(f"    return [{', '.join(i.name for i in ctx.inputs)}]")
    lines += ["", "", "def get_init_inputs():", f"    return [{', '.join(init_args)}]", ""]
    return "\n".join(lines)


def camel(op_name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in op_name.split("_"))
