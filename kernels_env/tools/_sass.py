"""SASS instruction mix from ``cuobjdump -sass`` or ``nvdisasm`` output (static counts per kernel).

What the agent wants to know at a glance: are tensor cores used (HMMA/HGMMA/IMMA/...), are global loads
vectorised (LDG.E.128/64), does the kernel spill (LDL/STL), does it use async copies (LDGSTS, TMA).
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

from ..host.cuda import find_cuda_tool

_FUNC_CUOBJDUMP = re.compile(r"^\s*Function : (\S+)")
_FUNC_NVDISASM = re.compile(r"^\s*\.text\.(\S+):\s*$")
_INSTR = re.compile(
    r"/\*[0-9a-fA-F]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
)

TENSOR_OPS = {
    "HMMA",
    "HGMMA",
    "IMMA",
    "IGMMA",
    "QGMMA",
    "DMMA",
    "BMMA",
    "BGMMA",
    "QMMA",
    "OMMA",
    "UTCMMA",
    "UTCHMMA",
    "UTCQMMA",
    "UTCIMMA",
    "UTCOMMA",
}
ASYNC_COPY = {"LDGSTS", "UTMALDG", "UTMASTG", "UBLKCP", "UTMAPF", "UTMACCTL", "LDGDEPBAR"}
_WIDTH_TOKENS = {"128": 128, "64": 64, "256": 256, "U8": 8, "S8": 8, "U16": 16, "S16": 16}
_GROUPS = {
    "fp32": {"FFMA", "FADD", "FMUL", "FMNMX", "FSETP", "FSEL", "FCHK", "FSET"},
    "fp16x2": {"HFMA2", "HADD2", "HMUL2", "HMNMX2", "HSETP2"},
    "fp64": {"DFMA", "DADD", "DMUL", "DSETP"},
    "special_function": {"MUFU"},
    "shared_memory": {"LDS", "STS", "LDSM", "STSM", "ATOMS"},
    "atomics": {"ATOM", "ATOMG", "RED", "REDG", "ATOMS"},
    "local_memory": {"LDL", "STL"},
    "barriers": {"BAR", "SYNCS", "WARPSYNC", "MEMBAR", "DEPBAR"},
    "warp_shuffle": {"SHFL"},
}


def _width(opcode: str) -> int:
    for tok in opcode.split(".")[1:]:
        if tok in _WIDTH_TOKENS:
            return _WIDTH_TOKENS[tok]
    return 32


def split_functions(text: str) -> dict[str, list[str]]:
    """{kernel name: [full opcode with modifiers, ...]} for cuobjdump -sass or nvdisasm listings."""
    funcs: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = _FUNC_CUOBJDUMP.match(line) or _FUNC_NVDISASM.match(line)
        if m:
            current = m.group(1)
            funcs.setdefault(current, [])
            continue
        if current is None:
            continue
        m = _INSTR.search(line)
        if m and m.group(1) != "NOP":  # NOPs are alignment padding, not work
            funcs[current].append(m.group(1))
    return funcs


def instruction_mix(opcodes: list[str], top: int = 8) -> dict:
    base = Counter(op.split(".")[0] for op in opcodes)
    ldg = Counter(_width(op) for op in opcodes if op.split(".")[0] == "LDG")
    stg = Counter(_width(op) for op in opcodes if op.split(".")[0] == "STG")
    n_ldg, n_stg = sum(ldg.values()), sum(stg.values())
    tensor = {op: n for op, n in base.items() if op in TENSOR_OPS}
    tensor_shapes = Counter(op for op in opcodes if op.split(".")[0] in TENSOR_OPS)
    groups = {g: sum(base[o] for o in ops) for g, ops in _GROUPS.items()}
    return {
        "instructions": len(opcodes),
        "tensor_core": tensor,
        "tensor_core_variants": dict(tensor_shapes.most_common(4)),
        "uses_tensor_cores": bool(tensor),
        "global_loads_by_width": {str(k): v for k, v in sorted(ldg.items())},
        "global_stores_by_width": {str(k): v for k, v in sorted(stg.items())},
        "vectorized_load_share": round(sum(v for k, v in ldg.items() if k >= 64) / n_ldg, 3)
        if n_ldg
        else None,
        "vectorized_store_share": round(sum(v for k, v in stg.items() if k >= 64) / n_stg, 3)
        if n_stg
        else None,
        "async_copy": {op: n for op, n in base.items() if op in ASYNC_COPY},
        "spill_instructions": base["LDL"] + base["STL"],
        "groups": {g: n for g, n in groups.items() if n},
        "top_opcodes": dict(base.most_common(top)),
    }


def parse_sass(text: str) -> dict[str, dict]:
    """{kernel: instruction_mix} for a whole listing."""
    return {name: instruction_mix(ops) for name, ops in split_functions(text).items()}


def _triton_bin() -> list[str]:
    """Triton wheels ship cuobjdump/nvdisasm/ptxas: a fallback when the CUDA toolkit lacks them."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin:
        return []
    return [str(Path(spec.origin).parent / "backends" / "nvidia" / "bin")]


def find_cuda_binary(name: str) -> str | None:
    """``name`` in the CUDA toolkit (``host.cuda``), else in Triton's bundled bin directory."""
    return find_cuda_tool(name, extra=[str(Path(d) / name) for d in _triton_bin()])


def find_disassembler() -> tuple[str, list[str]] | None:
    """(path, argv prefix) of cuobjdump -sass or nvdisasm, or None."""
    for name, args in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
        path = find_cuda_binary(name)
        if path:
            return path, args
    return None


def disassemble(cubin: str | Path, timeout_s: float = 60.0) -> dict:
    """Run the disassembler on a cubin: ``{"kernels": {name: mix}}`` or ``{"error": ...}``."""
    tool = find_disassembler()
    if tool is None:
        return {
            "error": "no SASS disassembler: neither cuobjdump nor nvdisasm is on PATH or in /usr/local/cuda"
        }
    path, args = tool
    try:
        proc = subprocess.run([path, *args, str(cubin)], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"{Path(path).name} timed out after {timeout_s:.0f}s"}
    if proc.returncode != 0:
        return {"error": f"{Path(path).name} failed: {proc.stderr.strip()[-500:]}"}
    return {"tool": Path(path).name, "kernels": parse_sass(proc.stdout)}
