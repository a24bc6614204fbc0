"""Find the kernels a candidate builds by importing it the way the harness does
(``kernels_env.judge.build.loader``).

- Fast-path builds (``cuda_library``, ``workspace_library``, ``nvrtc_kernel``) run for real (cached; in the
  compile worker build-only) and are observed through the fast path's own hook
  (``kernels_env.fastpath.hooks.observe_builds``): their sources, flags, artifact, ptxas resources and
  diagnostics are exactly what the candidate's build used.
- ``torch.utils.cpp_extension.load_inline`` / ``load`` and ``cupy.RawKernel`` / ``RawModule`` are replaced by
  recorders while the candidate imports (arguments bound against the real signatures), so a 50 s torch
  extension build never runs here; the compile tool compiles each recorded source itself.
- Triton ``@triton.jit`` functions left in the module are listed (their report needs a forward on a GPU).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fastpath.hooks import BuildEvent, observe_builds
from ._candidate import Candidate, CandidateError, load_candidate

LOAD_INLINE_PREFIX = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]


@dataclass
class CudaUnit:
    """One translation unit to compile: ``display`` is what diagnostics should call it."""

    display: str
    source: str
    origin: str  # workspace-file | load_inline | load | cupy
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
    units: list[CudaUnit] = field(default_factory=list)  # recorded sources the tool compiles itself
    fastpath: list[BuildEvent] = field(default_factory=list)  # the fast path's own builds
    triton: list = field(default_factory=list)  # (name, JITFunction)
    error: dict | None = None  # diagnostic of a failed import
    model_new: type | None = None
    modules: list = field(default_factory=list)  # its module and the workspace modules it imported


class _Stub:
    """Stands in for a built extension/kernel: any attribute or call returns another stub."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub()

    def __call__(self, *a, **k):
        return _Stub()


def anchor(py_files: dict[str, str], snippet: str) -> tuple[str, int] | None:
    """(Python file, line) where ``snippet``'s first line sits, if it appears verbatim (or, for a
    dedented string, where its first distinctive line does)."""
    for name, text in py_files.items():
        idx = text.find(snippet)
        if idx >= 0:
            return name, text[:idx].count("\n") + 1
    lines = snippet.splitlines()
    first = next((k for k, ln in enumerate(lines) if len(ln.strip()) > 8), None)
    if first is None:
        return None
    for name, text in py_files.items():
        idx = text.find(lines[first].strip())
        if idx >= 0:
            return name, text[:idx].count("\n") + 1 - first
    return None


# cupy's classes are Cython types without an introspectable signature: these are their documented ones.
def _raw_kernel_signature(code, name, options=(), backend="nvrtc", translate_cucomplex=False, **kw): ...
def _raw_module_signature(*, code=None, path=None, options=(), backend="nvrtc", **kw): ...


class _Recorder:
    """Stand-ins for the CUDA builders a candidate calls at import (``load_inline``, ``load``, CuPy's
    ``RawKernel``/``RawModule``): each records the CUDA source it was given as a ``CudaUnit`` and builds
    nothing."""

    def __init__(self, c: Candidate, cap: Capture):
        self.c, self.cap = c, cap
        self.py_files = c.python_files()
        self.count = 0

    def add(self, blocks: list[str], origin: str, flags=(), includes=(), needs_torch=False, prefix=()):
        self.count += 1
        segments, line = [], len(prefix) + 1
        for b in blocks:
            n = b.count("\n") + 1
            where = anchor(self.py_files, b)
            if where is not None:
                segments.append((line, n, *where))
            line += n
        self.cap.units.append(
            CudaUnit(
                display=f"{self.c.display}:<{origin}#{self.count}>",
                source="\n".join([*prefix, *blocks]),
                origin=origin,
                flags=[str(f) for f in flags or ()],
                include_dirs=[str(d) for d in includes or ()],
                needs_torch=needs_torch,
                segments=segments,
            )
        )

    def load_inline(self, signature: inspect.Signature):
        def record(*args, **kwargs):
            a = signature.bind(*args, **kwargs).arguments
            srcs = a.get("cuda_sources")
            srcs = [srcs] if isinstance(srcs, str) else list(srcs or [])
            if srcs:
                prefix = [] if a.get("no_implicit_headers") else LOAD_INLINE_PREFIX
                flags, includes = a.get("extra_cuda_cflags"), a.get("extra_include_paths")
                self.add(srcs, "load_inline", flags, includes, True, prefix)
            return _Stub()

        return record

    def load(self, signature: inspect.Signature):
        def record(*args, **kwargs):
            a = signature.bind(*args, **kwargs).arguments
            sources = a.get("sources") or []
            for s in [sources] if isinstance(sources, str) else sources:
                p = Path(s)
                if p.suffix in (".cu", ".cuh") and p.is_file():
                    self.cap.units.append(self._file_unit(p, s, a))
            return _Stub()

        return record

    def _file_unit(self, p: Path, given: str, a: dict) -> CudaUnit:
        inside = p.resolve().is_relative_to(self.c.root)
        return CudaUnit(
            display=str(p.resolve().relative_to(self.c.root).as_posix() if inside else given),
            source=p.read_text(errors="replace"),
            origin="load",
            flags=[str(f) for f in a.get("extra_cuda_cflags") or ()],
            include_dirs=[str(p.parent), *map(str, a.get("extra_include_paths") or ())],
            needs_torch=True,
        )

    def raw(self, signature):
        sig = inspect.signature(signature)

        def record(*args, **kwargs):
            a = sig.bind(*args, **kwargs).arguments
            code = a.get("code")
            if code is None and a.get("path"):
                code = Path(a["path"]).read_text(errors="replace")
            if isinstance(code, str):
                opts = [o for o in a.get("options") or () if isinstance(o, str)]
                self.add([code], "cupy", [o for o in opts if o.startswith(("-D", "-I", "--std", "-std"))])
            return _Stub()

        return record

    def patches(self) -> list[tuple[Any, str, Any]]:
        """(module, attribute, stand-in) for every builder to replace while the candidate is imported."""
        import torch.utils.cpp_extension as ce

        out = [
            (ce, "load_inline", self.load_inline(inspect.signature(ce.load_inline))),
            (ce, "load", self.load(inspect.signature(ce.load))),
        ]
        if any("cupy" in text for text in self.py_files.values()):  # importing cupy costs ~0.5 s
            with contextlib.suppress(Exception):
                cupy = importlib.import_module("cupy")
                out += [(cupy, "RawKernel", self.raw(_raw_kernel_signature))]
                out += [(cupy, "RawModule", self.raw(_raw_module_signature))]
        return out


def capture(c: Candidate) -> Capture:
    """Import the candidate with every CUDA builder recorded instead of run: its CUDA sources, fast-path
    builds, loaded modules and Triton kernels."""
    cap = Capture()
    patches = [(mod, attr, getattr(mod, attr), fake) for mod, attr, fake in _Recorder(c, cap).patches()]
    try:
        for mod, attr, _, fake in patches:
            setattr(mod, attr, fake)
        with observe_builds() as builds:
            try:
                loaded, cap.model_new = load_candidate(c)
                root = str(c.root) + "/"
                cap.modules = [loaded.module] + [
                    m
                    for m in list(sys.modules.values())
                    if m is not loaded.module and (getattr(m, "__file__", None) or "").startswith(root)
                ]
            except CandidateError as exc:
                cap.error = exc.diagnostic
        cap.fastpath = list(builds)
    finally:
        for mod, attr, orig, _ in patches:
            setattr(mod, attr, orig)
    cap.triton = find_triton_functions(cap.modules)
    return cap


def find_triton_functions(modules: list) -> list:
    """(name, JITFunction) of every Triton kernel defined in ``modules``."""
    if not modules or "triton" not in sys.modules:
        return []
    try:
        from triton.runtime.jit import JITFunction
    except Exception:  # noqa: BLE001
        return []
    kinds: tuple[type, ...] = (JITFunction,)
    with contextlib.suppress(Exception):  # TRITON_INTERPRET=1 (CPU mode): @triton.jit makes these instead
        from triton.runtime.interpreter import InterpretedFunction

        kinds += (InterpretedFunction,)
    found, seen = [], set()
    for name, obj in [item for m in modules for item in vars(m).items()]:
        fn = obj
        for _ in range(4):  # Autotuner / Heuristics wrap the JITFunction in .fn
            if isinstance(fn, kinds):
                if id(fn) not in seen:
                    seen.add(id(fn))
                    found.append((name, fn))
                break
            fn = getattr(fn, "fn", None)
            if fn is None:
                break
    return found


def source_locator(cap: Capture, py_files: dict[str, str]):
    """``locate(file, line, kernel) -> (python file, line) | None``: where a location a CUDA tool reports
    (compute-sanitizer with ``-lineinfo``: ``scale.cu:4``, or CuPy's ``<sha1>.cubin.cu:4``) sits in the
    candidate's Python file, for kernels whose source is a string there. The kernel's source is found by the
    file name the build used, else as the one source that defines the reported kernel."""
    units = list(cap.units)
    for ev in cap.fastpath:
        for name, text in ev.sources.items():
            where = anchor(py_files, text)
            if where is not None:
                units.append(CudaUnit(name, text, "fastpath", segments=[(1, text.count("\n") + 1, *where)]))

    def locate(file: str | None, line: int | None, kernel: str | None) -> tuple[str, int] | None:
        if not file or not line:
            return None
        base = Path(file).name
        named = [u for u in units if Path(u.display).name == base]
        if not named and kernel:
            short = kernel.split("(")[0].split("::")[-1].split("<")[0]
            named = [u for u in units if re.search(rf"__global__[^;{{]*\b{re.escape(short)}\s*\(", u.source)]
        return named[0].map_line(line) if len(named) == 1 else None

    return locate
