"""Which backends a solution uses and whether it needs a CUDA device, read from its sources (parsed imports,
source markers) and from what it built (``cache.BUILDS``), without running it.
"""

from __future__ import annotations

import re
from typing import Any

from .toolchains import KITTENS_INCLUDE, TOOLCHAINS, imported_modules

# Source markers of solutions that need a CUDA device to run (besides load_inline/load with CUDA sources,
# which the hooks below see). CPU mode gives such solutions the ``not_run`` verdict once they compiled.
CUDA_MARKERS = {
    "fastpath": re.compile(r"kernels_env\.fastpath|\bcuda_library\b|\bnvrtc_kernel\b"),
    "nvcc": re.compile(r"['\"]nvcc['\"]|/nvcc\b"),
}
OTHER_MARKERS = {
    "load_inline": re.compile(r"\bload_inline\b"),
    "cpp_extension": re.compile(r"cpp_extension"),
    "thunderkittens": KITTENS_INCLUDE,  # its C++ headers, included by a load_inline source
}
# Backends a solution uses by importing them: backend -> top-level modules. Read from the parsed imports, so
# ``import torch, triton, triton.language as tl`` and ``from triton import language as tl`` count.
# KernelBench's other backends (``kernels_env.judge.build.toolchains``): CuTe DSL, TileLang, ThunderKittens.
IMPORTED = {
    "triton": ("triton",),
    "cupy": ("cupy", "cupyx"),
    **{tc.backend: tc.modules for tc in TOOLCHAINS},
}
CUDA_IMPORTS = {"cupy", *(tc.backend for tc in TOOLCHAINS)}
# For a text that does not parse (a .cu file, a syntax error): import lines, also with several names.
_IMPORT_LINE = {
    backend: re.compile(
        rf"^\s*(?:from\s+(?:{'|'.join(mods)})\b|import\s+(?:[\w.]+(?:\s+as\s+\w+)?\s*,\s*)*"
        rf"(?:{'|'.join(mods)})\b)",
        re.M,
    )
    for backend, mods in IMPORTED.items()
}
# Errors that mean "this needs a CUDA device" when a solution runs in CPU mode.
NO_DEVICE = re.compile(
    r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|no CUDA GPUs are available|"
    r"CUDA driver initialization failed|cudaErrorNoDevice|cudaErrorInsufficientDriver|CUDA_ERROR_NO_DEVICE|"
    r"libcuda\.so"
)


def imported_backends(text: str) -> set[str]:
    """The ``IMPORTED`` backends (and ``fastpath``) a source imports anywhere, from its parsed imports; a text
    that does not parse as Python is searched line by line for import statements instead."""
    modules = imported_modules(text)
    if modules is None:
        return {backend for backend, rx in _IMPORT_LINE.items() if rx.search(text)}
    tops = {m.split(".")[0] for m in modules}
    found = {backend for backend, mods in IMPORTED.items() if tops & set(mods)}
    if any(m == "kernels_env.fastpath" or m.startswith("kernels_env.fastpath.") for m in modules):
        found.add("fastpath")  # ``from kernels_env import fastpath`` names no "kernels_env.fastpath" text
    return found


def detect_backends(texts: list[str], builds: list[dict[str, Any]]) -> list[str]:
    found = {
        name for name, rx in {**CUDA_MARKERS, **OTHER_MARKERS}.items() if any(rx.search(t) for t in texts)
    }
    found |= {b for t in texts for b in imported_backends(t)}
    found |= {b["builder"] for b in builds}
    if not found & {"fastpath", "nvcc", "load_inline", "cpp_extension", *IMPORTED}:
        found.add("torch")
    return sorted(found)


def needs_cuda(texts: list[str], builds: list[dict[str, Any]], workspace_files: list[str]) -> bool:
    if any(b.get("cuda") for b in builds):
        return True
    if any(f.endswith((".cu", ".cuh")) for f in workspace_files):
        return True
    if any(rx.search(t) for rx in CUDA_MARKERS.values() for t in texts):
        return True
    return any(imported_backends(t) & (CUDA_IMPORTS | {"fastpath"}) for t in texts)
