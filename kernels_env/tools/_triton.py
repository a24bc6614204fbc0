"""Triton backend of the compile and profile tools.

A Triton kernel is specialised on its arguments at first call, so its compiled forms exist only after the
candidate's forward ran (on a GPU). Each compiled kernel exposes ``asm`` (ttir/ttgir/llir/ptx/cubin) and
``metadata`` (shared memory, warps, stages); after loading, ``n_regs``/``n_spills``. Resource usage comes
from ``ptxas -v`` on its PTX (works without a GPU), the SASS mix from its cubin.
"""

from __future__ import annotations

import contextlib
import traceback

from ._candidate import build_model, load_reference, resolve_candidate, task_inputs
from ._context import ToolContext, run_cmd
from ._resources import ptxas_records
from ._sass import find_cuda_binary, parse_sass


def compiled_kernels(jit_fn) -> list:
    """Every CompiledKernel in a JITFunction's per-device caches (triton 3.x layout, defensive)."""
    out = []
    for entry in getattr(jit_fn, "device_caches", {}).values():
        caches = entry if isinstance(entry, (tuple, list)) else (entry,)
        for c in caches:
            if isinstance(c, dict):
                out.extend(v for v in c.values() if hasattr(v, "asm"))
                break
    for per_device in (
        getattr(jit_fn, "cache", {}).values() if isinstance(getattr(jit_fn, "cache", None), dict) else []
    ):
        if isinstance(per_device, dict):
            out.extend(v for v in per_device.values() if hasattr(v, "asm"))
    return out


def kernel_report(kernel, ctx: ToolContext, *, sass: bool = False) -> dict:
    md = kernel.metadata
    get = (lambda k: md.get(k)) if isinstance(md, dict) else (lambda k: getattr(md, k, None))
    name = get("name")
    target = get("target")
    arch = getattr(target, "arch", None)
    rep = {
        "name": name,
        "num_warps": get("num_warps"),
        "num_stages": get("num_stages"),
        "shared_bytes": get("shared"),
        "arch": f"sm_{arch}" if arch else None,
    }
    with contextlib.suppress(Exception):  # needs a GPU: loads the cubin
        kernel._init_handles()
    for attr in ("n_regs", "n_spills", "n_max_threads"):
        v = getattr(kernel, attr, None)
        if v is not None:
            rep[attr] = v
    ptx = kernel.asm.get("ptx") if isinstance(kernel.asm, dict) else None
    ptxas = find_cuda_binary("ptxas")
    if ptx and ptxas:
        tmp = ctx.tmpdir() / f"triton_{name}"
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "k.ptx").write_text(ptx)
        ptx_arch = "sm_90a" if arch == 90 else (f"sm_{arch}" if arch else "sm_90")
        for line in ptx.splitlines():
            if line.startswith(".target"):
                ptx_arch = line.split()[1].rstrip(",")
                break
        res = run_cmd(
            [ptxas, "-v", f"-arch={ptx_arch}", "-o", str(tmp / "k.cubin"), str(tmp / "k.ptx")],
            min(60.0, ctx.check_time("ptxas")),
        )
        records = ptxas_records(res.stdout + res.stderr)
        if records:
            rep["ptxas"] = records[0]
    cubin = kernel.asm.get("cubin") if isinstance(kernel.asm, dict) else None
    if sass and cubin:
        tool = find_cuda_binary("cuobjdump")
        if tool:
            path = ctx.tmpdir() / f"triton_{name}.cubin"
            path.write_bytes(cubin)
            res = run_cmd([tool, "-sass", str(path)], min(60.0, ctx.check_time("cuobjdump")))
            mixes = parse_sass(res.stdout)
            rep["sass"] = mixes.get(name) or (next(iter(mixes.values())) if mixes else None)
    return rep


def triton_compile_report(cap, args: dict, ctx: ToolContext, *, sass: bool = False) -> dict:
    """Run the candidate's forward once on the reference's inputs (GPU) so its Triton kernels compile, then
    report each; compilation errors come back as diagnostics."""
    names = [n for n, _ in cap.triton]
    out: dict = {"functions": names, "kernels": [], "diagnostics": [], "ok": True}
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        has_gpu = False
    if not has_gpu or not args.get("reference"):
        out["note"] = (
            "Triton kernels are specialised at first call: their compile report needs a GPU and "
            "'reference' (for the inputs)"
            if not has_gpu
            else "pass 'reference' to compile Triton kernels"
        )
        return out
    c = resolve_candidate(args["solution"])
    problem = load_reference(args["reference"])
    try:
        with torch.no_grad():
            model = build_model(problem, cap.model_new, "cuda")
            model(*task_inputs(problem, "cuda"))
            torch.cuda.synchronize()
    except BaseException as e:  # noqa: BLE001
        out["ok"] = False
        msg = f"{type(e).__name__}: {e}"
        out["diagnostics"].append(
            {
                "severity": "error",
                "file": c.display,
                "line": None,
                "column": None,
                "code": type(e).__name__,
                "message": msg[:3000],
                "tool": "triton",
                "traceback": traceback.format_exc()[-2000:],
            }
        )
    for _, fn in cap.triton:
        for k in compiled_kernels(fn):
            out["kernels"].append(kernel_report(k, ctx, sass=sass))
    return out
