"""The ``compile`` tool: diagnostics with file:line, ptxas resource usage per kernel, SASS mix on request.

Sources (see ``_capture``): the candidate's fast-path builds as they really ran (observed, cached), the
CUDA sources it passes to ``load_inline`` / ``load`` / CuPy, a workspace's ``kernels/**/*.cu`` that no
build covered, and Triton kernels (``_triton``). Recorded sources are compiled here to a cubin with
``nvcc -cubin -lineinfo -Xptxas -v`` for the target architecture. Diagnostics inside Python strings are
mapped back to the line of the Python file the agent edits. Parsing is the fast path's
(``kernels_env.fastpath.diagnostics``).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..fastpath import toolchain
from ..fastpath.diagnostics import parse_diagnostics
from ..fastpath.hooks import BuildEvent
from ._candidate import Candidate, resolve_candidate
from ._capture import CudaUnit, anchor, capture
from ._context import ToolContext, ToolError, run_cmd
from ._resources import ptxas_records, resource_records
from ._sass import disassemble
from ._triton import triton_compile_report

_SAFE_FLAG = re.compile(
    r"^(-O[0-3]|--use_fast_math|-use_fast_math|-std=c\+\+\d+|--std=c\+\+\d+|-D[\w=.]+|"
    r"--extended-lambda|--expt-relaxed-constexpr|--expt-extended-lambda|-lineinfo|"
    r"-maxrregcount=\d+|--maxrregcount=\d+|--ftz=\w+|--prec-div=\w+|--fmad=\w+|-Xptxas=\S+)$"
)


def _torch_includes() -> list[str]:
    import torch

    inc = Path(torch.__file__).parent / "include"
    return [str(inc), str(inc / "torch" / "csrc" / "api" / "include")]


def workspace_units(root: Path) -> list[CudaUnit]:
    units = []
    for p in sorted(root.rglob("*.cu")):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        text = p.read_text(errors="replace")
        units.append(
            CudaUnit(
                display=rel.as_posix(),
                source=text,
                origin="workspace-file",
                include_dirs=[str(p.parent), str(root)],
                needs_torch="torch/" in text,
            )
        )
    return units


def _timeout_diag(display: str) -> dict:
    return {"severity": "error", "file": display, "line": None, "column": None, "message": "nvcc timed out"}


def compile_unit(unit: CudaUnit, index: int, arch: str, ctx: ToolContext, *, sass: bool) -> dict:
    try:
        nvcc = toolchain.nvcc_path()
    except FileNotFoundError as exc:
        raise ToolError(str(exc)) from None
    tmp = ctx.tmpdir() / f"unit{index}"
    tmp.mkdir(parents=True, exist_ok=True)
    name = f"unit{index}.cu"
    (tmp / name).write_text(unit.source)
    flags = [f for f in unit.flags if _SAFE_FLAG.match(f)]
    cmd = [nvcc, "-cubin", f"-arch={arch}", "-lineinfo", "-Xptxas", "-v", "-o", "out.cubin", *flags]
    includes = list(unit.include_dirs) + (_torch_includes() if unit.needs_torch else [])
    cmd += [f"-I{d}" for d in includes] + [name]
    res = run_cmd(cmd, ctx.check_time(f"compiling {unit.display}"), cwd=tmp)
    log = res.stdout + res.stderr
    path_map = {name: unit.display, str(tmp / name): unit.display}
    diags = parse_diagnostics(log, "nvcc", sources={unit.display: unit.source}, path_map=path_map)
    for d in diags:
        if d.get("file") == unit.display and d.get("line"):
            mapped = unit.map_line(d["line"])
            if mapped:
                d["unit"], d["unit_line"] = unit.display, d["line"]
                d["file"], d["line"] = mapped
    if res.timed_out:
        diags.append(_timeout_diag(unit.display))
    ok = res.returncode == 0 and not res.timed_out
    out = {
        "unit": unit.display,
        "origin": unit.origin,
        "ok": ok,
        "command": " ".join(Path(cmd[0]).name if i == 0 else c for i, c in enumerate(cmd)),
        "elapsed_s": round(res.elapsed_s, 3),
        "diagnostics": diags,
        "kernels": ptxas_records(log),
    }
    if ok and sass:
        _add_sass(out, tmp / "out.cubin", ctx)
    return out


def fastpath_report(ev: BuildEvent, c: Candidate, py_files: dict[str, str], ctx: ToolContext, sass: bool):
    """A fast-path build as it ran: its diagnostics mapped to the agent's files, its ptxas resources."""
    root = str(c.root) + "/"
    diags = []
    for d in ev.diagnostics:
        d = dict(d)
        file = d.get("file")
        if isinstance(file, str) and file.startswith(root):
            d["file"] = file = file[len(root) :]
        text = ev.sources.get(file) if file else None
        if text is not None and d.get("line") and not (c.root / file).is_file():
            where = anchor(py_files, text)  # a source string inside the Python file: point at that line
            if where is not None:
                d["unit"], d["unit_line"] = file, d["line"]
                d["file"], d["line"] = where[0], where[1] + d["line"] - 1
        diags.append(d)
    names = [n[len(root) :] if n.startswith(root) else n for n in ev.sources]
    out = {
        "unit": f"{ev.kind} {ev.name!r} ({', '.join(names)})",
        "origin": f"fastpath.{ev.kind}",
        "ok": ev.error is None,
        "cache_hit": ev.cache_hit,
        "arch": ev.arch,
        "diagnostics": diags,
        "kernels": resource_records(ev.resources),
    }
    if ev.artifact and sass:
        _add_sass(out, Path(ev.artifact), ctx)
    return out


def _add_sass(out: dict, binary: Path, ctx: ToolContext) -> None:
    dis = disassemble(binary, timeout_s=min(60.0, ctx.check_time("disassembly")))
    if "error" in dis:
        out["sass_error"] = dis["error"]
        return
    for k in out["kernels"]:
        k["sass"] = dis["kernels"].get(k["name"])


def compile_tool(args: dict, ctx: ToolContext) -> dict:
    if "solution" not in args:
        raise ToolError("compile needs 'solution' (a .py file or a workspace directory)")
    c = resolve_candidate(args["solution"])
    try:
        arch = toolchain.resolve_arch(args.get("arch"))
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    sass = bool(args.get("sass", False))
    cap = capture(c)
    py_files = c.python_files()
    results = [fastpath_report(ev, c, py_files, ctx, sass) for ev in cap.fastpath]
    recorded = {u.display for u in cap.units}
    built = {n.removeprefix(str(c.root) + "/") for ev in cap.fastpath for n in ev.sources}
    units = [u for u in workspace_units(c.root) if u.display not in built | recorded] if c.workspace else []
    units += cap.units
    results += [compile_unit(u, i, arch, ctx, sass=sass) for i, u in enumerate(units)]
    order = {"error": 0, "warning": 1}
    diagnostics = sorted(
        (d for r in results for d in r["diagnostics"]), key=lambda d: order.get(d["severity"], 2)
    )
    build_failed = any(ev.error is not None for ev in cap.fastpath)
    if cap.error is not None and not build_failed:  # a failed build's import error repeats its diagnostics
        diagnostics.insert(0, cap.error)
    result = {
        "ok": cap.error is None and all(r["ok"] for r in results),
        "arch": arch,
        "units": results,
        "kernels": [{**k, "unit": r["unit"]} for r in results for k in r["kernels"]],
        "diagnostics": diagnostics,
        "errors": sum(1 for d in diagnostics if d.get("severity") == "error"),
        "warnings": sum(1 for d in diagnostics if d.get("severity") == "warning"),
    }
    if cap.triton:
        result["triton"] = triton_compile_report(cap, args, ctx, sass=sass)
        if not result["triton"].get("ok", True):
            result["ok"] = False
    if not results and not cap.triton and cap.error is None:
        result["note"] = (
            "no CUDA or Triton sources found (fast path, load_inline, load, cupy.RawKernel, kernels/*.cu, "
            "@triton.jit)"
        )
    return result
