"""Find the kernel sources a candidate builds, by importing it with the builders replaced by recorders.

Captured: ``torch.utils.cpp_extension.load_inline`` (cuda_sources) and ``load`` (.cu files),
``cupy.RawKernel`` / ``cupy.RawModule`` (NVRTC code), the sandbox fast path (``kernels_env.fastpath``
``cuda_library`` / ``nvrtc_kernel``, when present), and Triton ``@triton.jit`` functions left in the module.
Builders return inert stubs, so importing costs no compilation; the compile tool then compiles each captured
source itself with diagnostics on. Runs the candidate's module-level code: only inside a tool process.
"""

from __future__ import annotations

import contextlib
import importlib
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ._load import Solution, in_directory, load_module

LOAD_INLINE_PREFIX = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]


@dataclass
class CudaUnit:
    """One translation unit to compile: ``display`` is what diagnostics should call it."""

    display: str
    source: str
    origin: str  # workspace-file | load_inline | load | cupy | fastpath
    flags: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    needs_torch: bool = False
    # where blocks of the unit sit in a Python file: (first unit line, line count, py file, py line)
    segments: list[tuple[int, int, str, int]] = field(default_factory=list)

    def map_line(self, line: int) -> tuple[str, int] | None:
        for first, count, py_file, py_line in self.segments:
            if first <= line < first + count:
                return py_file, py_line + (line - first)
        return None


@dataclass
class Capture:
    units: list[CudaUnit] = field(default_factory=list)
    triton: list = field(default_factory=list)  # (name, JITFunction)
    import_error: dict | None = None
    module: object = None


class _Stub:
    """Stands in for a built extension/kernel: any attribute or call returns another stub."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub()

    def __call__(self, *a, **k):
        return _Stub()


def _anchor(py_text: str, snippet: str) -> int | None:
    """Line in the Python file where ``snippet``'s first line sits, if it appears there verbatim."""
    idx = py_text.find(snippet)
    if idx >= 0:
        return py_text[:idx].count("\n") + 1
    lines = snippet.splitlines()
    first = next((k for k, ln in enumerate(lines) if len(ln.strip()) > 8), None)
    if first is None:
        return None
    idx = py_text.find(lines[first].strip())  # a dedented/reformatted string: anchor on a distinctive line
    return None if idx < 0 else py_text[:idx].count("\n") + 1 - first


def capture(sol: Solution) -> Capture:
    cap = Capture()
    py_text = sol.path.read_text(errors="replace")
    py_name = sol.path.name
    n = {"i": 0}

    def add(blocks: list[str], origin: str, flags=(), includes=(), needs_torch=False, prefix=()):
        n["i"] += 1
        segments, line = [], len(prefix) + 1
        for b in blocks:
            count = b.count("\n") + 1
            at = _anchor(py_text, b)
            if at is not None:
                segments.append((line, count, py_name, at))
            line += count
        cap.units.append(
            CudaUnit(
                display=f"{py_name}:<{origin}#{n['i']}>",
                source="\n".join([*prefix, *blocks]),
                origin=origin,
                flags=list(flags),
                include_dirs=list(includes),
                needs_torch=needs_torch,
                segments=segments,
            )
        )

    def fake_load_inline(name=None, cpp_sources=None, cuda_sources=None, *a, **k):
        srcs = (
            cuda_sources
            if isinstance(cuda_sources, (list, tuple))
            else ([cuda_sources] if cuda_sources else [])
        )
        if srcs:
            prefix = [] if k.get("no_implicit_headers") else LOAD_INLINE_PREFIX
            add(
                list(srcs),
                "load_inline",
                k.get("extra_cuda_cflags") or (),
                k.get("extra_include_paths") or (),
                needs_torch=True,
                prefix=prefix,
            )
        return _Stub()

    def fake_load(name=None, sources=(), *a, **k):
        for s in [sources] if isinstance(sources, str) else sources:
            p = Path(s)
            if p.suffix in (".cu", ".cuh") and p.is_file():
                cap.units.append(
                    CudaUnit(
                        display=str(s),
                        source=p.read_text(errors="replace"),
                        origin="load",
                        flags=list(k.get("extra_cuda_cflags") or ()),
                        include_dirs=[str(p.parent), *(k.get("extra_include_paths") or ())],
                        needs_torch=True,
                    )
                )
        return _Stub()

    def fake_raw(code=None, name=None, options=(), *a, **k):
        code = code if code is not None else k.get("code")
        if isinstance(code, str):
            add(
                [code],
                "cupy",
                [
                    o
                    for o in (options or ())
                    if isinstance(o, str) and o.startswith(("-D", "-I", "--std", "-std"))
                ],
            )
        return _Stub()

    def fake_fastpath(*a, **k):
        src = (
            k.get("source")
            or k.get("src")
            or k.get("code")
            or next((x for x in a if isinstance(x, str) and "__global__" in x), None)
        )
        srcs = k.get("sources")
        if isinstance(src, str):
            add([src], "fastpath")
        for s in srcs or ():
            if isinstance(s, str) and "__global__" in s:
                add([s], "fastpath")
        return _Stub()

    patches = []
    with contextlib.ExitStack() as stack:
        for mod_name, attr, fake in (
            ("torch.utils.cpp_extension", "load_inline", fake_load_inline),
            ("torch.utils.cpp_extension", "load", fake_load),
            ("cupy", "RawKernel", fake_raw),
            ("cupy", "RawModule", fake_raw),
            ("kernels_env.fastpath", "cuda_library", fake_fastpath),
            ("kernels_env.fastpath", "nvrtc_kernel", fake_fastpath),
        ):
            try:
                mod = importlib.import_module(mod_name)
            except Exception:  # noqa: BLE001 - an absent builder cannot be used by the candidate either
                continue
            if hasattr(mod, attr):
                patches.append((mod, attr, getattr(mod, attr)))
                setattr(mod, attr, fake)
        stack.callback(lambda: [setattr(m, a, orig) for m, a, orig in patches])
        try:
            with in_directory(sol.root):
                cap.module = load_module(sol.path, "kernels_env_capture")
        except BaseException as e:  # noqa: BLE001
            cap.import_error = _python_error(e, sol.path)
    if cap.module is not None:
        cap.triton = find_triton_functions(cap.module)
    return cap


def find_triton_functions(module) -> list:
    try:
        from triton.runtime.jit import JITFunction
    except Exception:  # noqa: BLE001
        return []
    found = []
    for name, obj in vars(module).items():
        fn = obj
        for _ in range(4):  # Autotuner / Heuristics wrap the JITFunction in .fn
            if isinstance(fn, JITFunction):
                found.append((name, fn))
                break
            fn = getattr(fn, "fn", None)
            if fn is None:
                break
    return found


def _python_error(e: BaseException, path: Path) -> dict:
    line = getattr(e, "lineno", None)
    if line is None:
        for fr in reversed(traceback.extract_tb(e.__traceback__)):
            if Path(fr.filename).name == path.name:
                line = fr.lineno
                break
    return {
        "severity": "error",
        "file": path.name,
        "line": line,
        "column": getattr(e, "offset", None),
        "code": type(e).__name__,
        "message": f"{type(e).__name__}: {e}"[:1000],
        "tool": "python",
    }
