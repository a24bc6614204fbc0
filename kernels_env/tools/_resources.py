"""Per-kernel resource records (registers, shared memory, spills, stack) for the tools' JSON, from the fast
path's ``ptxas -v`` parser (``kernels_env.fastpath.diagnostics``), and readable kernel names."""

from __future__ import annotations

import re

from ..fastpath.diagnostics import KernelResources, parse_ptxas_resources


def short_kernel_name(name: str) -> str:
    """``_Z9wmma_gemmILi4EEvPK6__halfS2_Pfiii`` -> ``wmma_gemm``; ``_ZN2ns3fooEv`` -> ``ns::foo``.

    A tiny Itanium-ABI reader for the leading (possibly nested) name only, enough for a label without
    running a demangler; unmangled (``extern "C"``) and demangled names (``void foo<4>(float*)``) are trimmed.
    """
    if not name.startswith("_Z"):
        return _short_demangled(name)
    rest = name[2:]
    nested = rest.startswith("N")
    if nested:
        rest = rest[1:]
        while rest[:1] in ("K", "V", "r"):
            rest = rest[1:]
    parts = []
    while rest and rest[0].isdigit():
        m = re.match(r"(\d+)", rest)
        n = int(m.group(1))
        start = len(m.group(1))
        parts.append(rest[start : start + n])
        rest = rest[start + n :]
        if not nested or rest.startswith("I"):  # template arguments: keep the readable prefix
            break
    return "::".join(parts) if parts else name


def _short_demangled(name: str, max_template: int = 48) -> str:
    """``void native::k<4, F<float>, std::array<char *, 3>>(int, T2, T3)`` -> ``native::k<4, F<float>, ...>``:
    no return type or parameters (split at top level, outside ``<>``), long template arguments cut."""
    name = name.replace("(anonymous namespace)", "{anonymous}")
    depth, cut, start = 0, len(name), 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and ch == "(" and i > 0:
            cut = i
            break
        elif depth == 0 and ch == " ":
            start = i + 1  # what came before was a return type or qualifier
    base = name[start:cut].strip() or name.strip()
    lt = base.find("<")
    if lt >= 0 and len(base) - lt > max_template:
        base = base[: lt + max_template].rstrip(", ") + ", ...>"
    return base


def resource_records(resources: list[KernelResources]) -> list[dict]:
    """JSON records of the kernels (entries) and of device functions that spill or use a stack frame."""
    out = []
    for r in resources:
        if not r.entry and not (r.spills or r.stack_frame_bytes):
            continue
        rec = r.to_dict()
        rec["short_name"] = short_kernel_name(r.name)
        rec["spills"] = r.spills
        out.append(rec)
    return out


def ptxas_records(log: str) -> list[dict]:
    """``resource_records`` straight from a ``ptxas -v`` log (nvcc stderr or an NVRTC program log)."""
    return resource_records(parse_ptxas_resources(log))
