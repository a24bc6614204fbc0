"""Parse ``ptxas -v`` (also as relayed by ``nvcc -Xptxas -v``) into per-kernel resource usage.

Formats seen (CUDA 11-13): ``Compiling entry function 'NAME' for 'sm_90'``, ``Function properties for NAME``
followed by ``N bytes stack frame, N bytes spill stores, N bytes spill loads``, and
``Used N registers, used N barriers, N bytes smem, N bytes cmem[0], N bytes cumulative stack size``
(older toolkits print ``cmem``/``lmem`` fields; CUDA 13 drops cmem). Overlaps with
``kernels_env/fastpath/diagnostics.py`` (the fast path's own ptxas parser); this one also keeps per-kernel
spill/stack detail and the ptxas diagnostics.
"""

from __future__ import annotations

import re

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
)
_USED = re.compile(r"Used (\d+) registers")
_FIELDS = {
    "barriers": re.compile(r"used (\d+) barriers"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
    "local_bytes": re.compile(r"(\d+) bytes lmem"),
    "cumulative_stack_bytes": re.compile(r"(\d+) bytes cumulative stack size"),
}
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")
_GMEM = re.compile(r"(\d+) bytes gmem")
_DIAG = re.compile(r"^ptxas\s+(error|warning|fatal)\s*:\s*(.*)$")


def short_kernel_name(name: str) -> str:
    """``_Z9wmma_gemmILi4EEvPK6__halfS2_Pfiii`` -> ``wmma_gemm``; ``_ZN2ns3fooEv`` -> ``ns::foo``.

    A tiny Itanium-ABI reader for the leading (possibly nested) name only, enough for a readable label;
    unmangled names (``extern "C"``) and demangled ones (``void foo<4>(float*)``) pass through trimmed."""
    if not name.startswith("_Z"):
        base = name.split("(")[0].strip()
        return base.split(" ")[-1] if " " in base else base
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
        if not nested:
            break
        if rest.startswith("I"):  # template args of an inner name: stop at the readable prefix
            break
    return "::".join(parts) if parts else name


def parse_ptxas(text: str) -> dict:
    """Returns ``{"kernels": [...], "diagnostics": [...], "gmem_bytes": int|None}``.

    Each kernel: name, short_name, arch, registers, barriers, shared_bytes (static), stack_frame_bytes,
    spill_store_bytes, spill_load_bytes, cumulative_stack_bytes, constant_bytes ({bank: bytes}),
    spills (bool).
    """
    kernels: dict[str, dict] = {}
    order: list[str] = []
    current = None
    diagnostics = []
    gmem = None

    def kernel(name: str) -> dict:
        if name not in kernels:
            kernels[name] = {
                "name": name,
                "short_name": short_kernel_name(name),
                "arch": None,
                "registers": None,
                "barriers": 0,
                "shared_bytes": 0,
                "local_bytes": 0,
                "stack_frame_bytes": 0,
                "spill_store_bytes": 0,
                "spill_load_bytes": 0,
                "cumulative_stack_bytes": 0,
                "constant_bytes": {},
            }
            order.append(name)
        return kernels[name]

    for raw in text.splitlines():
        line = raw.strip()
        d = _DIAG.match(line)
        if d:
            diagnostics.append(
                {
                    "severity": "error" if d.group(1) == "fatal" else d.group(1),
                    "tool": "ptxas",
                    "message": d.group(2).strip(),
                }
            )
            continue
        m = _ENTRY.search(line)
        if m:
            current = kernel(m.group(1))
            current["arch"] = m.group(2)
            continue
        m = _PROPS.search(line)
        if m:
            current = kernel(m.group(1))
            continue
        m = _FRAME.search(line)
        if m and current is not None:
            current["stack_frame_bytes"], current["spill_store_bytes"], current["spill_load_bytes"] = (
                int(g) for g in m.groups()
            )
            continue
        m = _USED.search(line)
        if m and current is not None:
            current["registers"] = int(m.group(1))
            for key, rx in _FIELDS.items():
                f = rx.search(line)
                if f:
                    current[key] = int(f.group(1))
            for nbytes, bank in _CMEM.findall(line):
                current["constant_bytes"][bank] = int(nbytes)
            continue
        m = _GMEM.search(line)
        if m and "ptxas info" in line:
            gmem = int(m.group(1))
    out = []
    for name in order:
        k = kernels[name]
        k["spills"] = bool(k["spill_store_bytes"] or k["spill_load_bytes"])
        out.append(k)
    return {"kernels": out, "diagnostics": diagnostics, "gmem_bytes": gmem}
