"""The ``compile`` tool: diagnostics with file:line, ptxas resource usage per kernel, SASS mix on request.

Sources: a workspace's ``kernels/**/*.cu`` plus every CUDA source the candidate builds at import
(see ``_capture``), and Triton kernels (``_triton``). Each CUDA unit is compiled to a cubin with
``nvcc -cubin -lineinfo -Xptxas -v`` for the device's architecture; diagnostics inside inline sources are
mapped back to the line of the Python file the agent edits.
"""

from __future__ import annotations

import glob
import re
import shutil
from pathlib import Path

from ._capture import CudaUnit, capture
from ._context import ToolContext, ToolError, run_cmd
from ._diagnostics import parse_diagnostics
from ._load import resolve_solution
from ._ptxas import parse_ptxas
from ._sass import disassemble

_SAFE_FLAG = re.compile(
    r"^(-O[0-3]|--use_fast_math|-use_fast_math|-std=c\+\+\d+|--std=c\+\+\d+|-D[\w=.]+|"
    r"--extended-lambda|--expt-relaxed-constexpr|--expt-extended-lambda|-lineinfo|"
    r"-maxrregcount=\d+|--maxrregcount=\d+|--ftz=\w+|--prec-div=\w+|--fmad=\w+|-Xptxas=\S+)$"
)


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    cands = ["/usr/local/cuda/bin/nvcc", *sorted(glob.glob("/usr/local/cuda-*/bin/nvcc"), reverse=True)]
    return next((c for c in cands if Path(c).exists()), None)


def device_arch(requested: str | None = None) -> str:
    if requested:
        return requested if requested.startswith("sm_") else f"sm_{requested}"
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001
        pass
    return "sm_90"


def _torch_includes() -> list[str]:
    import torch

    inc = Path(torch.__file__).parent / "include"
    return [str(inc), str(inc / "torch" / "csrc" / "api" / "include")]


def workspace_units(root: Path) -> list[CudaUnit]:
    units = []
    for p in sorted(root.rglob("*.cu")):
        rel = p.relative_to(root).as_posix()
        if any(part.startswith(".") for part in p.relative_to(root).parts):
            continue
        units.append(
            CudaUnit(
                display=rel,
                source=p.read_text(errors="replace"),
                origin="workspace-file",
                include_dirs=[str(p.parent), str(root)],
                needs_torch="torch/" in p.read_text(errors="replace"),
            )
        )
    return units


def compile_unit(unit: CudaUnit, index: int, arch: str, ctx: ToolContext, *, sass: bool) -> dict:
    nvcc = find_nvcc()
    if nvcc is None:
        raise ToolError("nvcc not found (PATH, /usr/local/cuda/bin): cannot compile CUDA sources")
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
    diags = parse_diagnostics(log, {name: unit.display, str(tmp / name): unit.display})
    for d in diags:
        if d.get("file") == unit.display and d.get("line"):
            mapped = unit.map_line(d["line"])
            if mapped:
                d["unit_line"] = d["line"]
                d["file"], d["line"] = mapped
    ptxas = parse_ptxas(log)
    for d in ptxas["diagnostics"]:
        if not any(x["message"] == d["message"] for x in diags):
            diags.append({**d, "file": None, "line": None, "column": None, "code": None})
    ok = res.returncode == 0 and not res.timed_out
    out = {
        "unit": unit.display,
        "origin": unit.origin,
        "ok": ok,
        "command": " ".join(Path(cmd[0]).name if i == 0 else c for i, c in enumerate(cmd)),
        "elapsed_s": round(res.elapsed_s, 3),
        "diagnostics": diags,
        "kernels": ptxas["kernels"],
    }
    if res.timed_out:
        out["diagnostics"].append(
            {
                "severity": "error",
                "file": unit.display,
                "line": None,
                "column": None,
                "code": "timeout",
                "message": "nvcc timed out",
                "tool": "nvcc",
            }
        )
    if ok and sass:
        dis = disassemble(tmp / "out.cubin", timeout_s=min(60.0, ctx.check_time("disassembly")))
        if "error" in dis:
            out["sass_error"] = dis["error"]
        else:
            for k in out["kernels"]:
                k["sass"] = dis["kernels"].get(k["name"])
    return out


def compile_tool(args: dict, ctx: ToolContext) -> dict:
    if "solution" not in args:
        raise ToolError("compile needs 'solution' (a .py file or a workspace directory)")
    sol = resolve_solution(args["solution"])
    arch = device_arch(args.get("arch"))
    sass = bool(args.get("sass", False))
    units = workspace_units(sol.root) if sol.is_workspace else []
    cap = capture(sol)
    units += cap.units
    results = [compile_unit(u, i, arch, ctx, sass=sass) for i, u in enumerate(units)]
    diagnostics = ([cap.import_error] if cap.import_error else []) + [
        d for r in results for d in r["diagnostics"]
    ]
    result = {
        "ok": cap.import_error is None and all(r["ok"] for r in results),
        "arch": arch,
        "units": results,
        "kernels": [{**k, "unit": r["unit"]} for r in results for k in r["kernels"]],
        "diagnostics": diagnostics,
        "errors": sum(1 for d in diagnostics if d["severity"] == "error"),
        "warnings": sum(1 for d in diagnostics if d["severity"] == "warning"),
    }
    if cap.triton:
        from ._triton import triton_compile_report

        result["triton"] = triton_compile_report(cap, args, ctx, sass=sass)
        if not result["triton"].get("ok", True):
            result["ok"] = False
    if not units and not cap.triton and cap.import_error is None:
        result["note"] = (
            "no CUDA or Triton sources found "
            "(load_inline, cupy.RawKernel, fast path, kernels/*.cu, @triton.jit)"
        )
    return result
