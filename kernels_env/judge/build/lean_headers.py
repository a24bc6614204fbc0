"""The lean-header build path of ``load_inline``: the CUDA translation unit without ``torch/extension.h``.

KernelBench-style solutions start ``cuda_sources`` with ``#include <torch/extension.h>``: the whole torch C++
frontend (nn, optim, jit, ...), pybind11 and Python.h, parsed by nvcc's cudafe++, by cicc, and by g++ over
cudafe++'s output. load_inline already starts the .cu with ``#include <torch/types.h>``, <cuda.h> and
<cuda_runtime.h> (torch documents this; it is ATen, the tensor API such sources use), so where a source needs
nothing more the include is left out: benchmarks/load_inline_set's 33_row_softmax's .cu goes from 66.9 to 30.5
CPU-s, its whole cold build (with the shared PCH) from 78.6 to 42.4 (2-core machine;
``benchmarks/build_phases.py`` has the split by phase). This is load_inline in its fastest documented form;
pybind11 bindings are generated in main.cpp, which keeps its torch/extension.h (and the shared PCH of it,
``pch.py``).

Only the .cu and only lines that are exactly an include of ``torch/extension.h``, ``torch/torch.h`` (the
same, as load_inline defines ``TORCH_API_INCLUDE_EXTENSION_H``) or ``torch/all.h`` (the frontend without its
Python half) change, each into a comment on the same line, so the compiler's line numbers stay the
candidate's. The include stays (the
build is as written) when:

- the path is off: ``KERNELS_ENV_LEAN_HEADERS=0``, or ``no_implicit_headers=True`` (no torch/types.h first);
- the source evidently uses what only the full header gives: pybind11 (``py::``, ``PYBIND11_*``), the
  Python C API, the frontend's namespaces (``torch::nn``, ``torch::optim``, ``torch::autograd``,
  ``torch::jit``, ``torch::cuda``, ...), or any ``torch::``/``at::``/``c10::`` name spelled only in the
  headers only the full header includes (``full_header_names.py``);
- leaving the include out could change the source's meaning without an error: it mentions a macro only the
  full header defines (``#if TORCH_VERSION_MAJOR >= 2`` is false when undefined), or defines, before the
  include, a macro that the full header's own headers spell; or the include follows a line continuation,
  or the source has a raw string literal (a line inside one is text, not an include).

Anything else a source needs from the full header fails to compile lean; then, and whenever the lean build
fails for any reason, the candidate is built exactly as written (with fast_build's flags and its own plain
fallback), so a compile error is always the as-written build's: its diagnostics, files and line numbers.
The one way round this does not cover: a source whose own declarations clash with what only the full
header declares (its own global ``stat``, or a type named ``queue`` under ``using namespace std``) compiles
lean but would not as written; the checks above catch the macro kind of clash, not these.
The kernels are the same either way: device code depends on the kernels' own source and what they call,
never on the host-only frontend, and tests/sandbox/test_lean_headers.py finds byte-identical sm_90 cubins
for solutions built both ways. The host object is the same C++ (every name it uses has the same
declarations), but g++ -O3 weighs the whole translation unit when it inlines, so it may inline or emit a
library helper (``c10::str``'s, say) differently.

The choice is read back from the build directory: a ``cuda.cu`` that ends with the lean (or the as-written)
source keeps that choice, whatever the switch says now, so the run stage's load_inline asks ninja for the
build the compile stage made and nothing is rebuilt. The content key (``build.extension_key``) is computed
on the candidate's own arguments. A ``build_directory`` the candidate chose gets the same path, decided the
same way; its own directory is read back like the sandbox's. ``cache.BUILDS`` records ``headers`` per
build: ``lean``, ``as-written`` or ``as-written-after-lean``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from . import cache, fast_build, full_header_names
from .cache import SANDBOX_CACHE_ENV
from .full_header_names import NOT_CODE, FullHeaderNames, code_identifiers

MODE_ENV = "KERNELS_ENV_LEAN_HEADERS"  # 1 (default) | 0
# A whole line that only includes the full header (an optional // comment after it).
FULL_INCLUDE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"](torch/(?:extension|torch|all)\.h)[>"][ \t]*(?://[^\r\n]*)?(?=\r?$)',
    re.M,
)
LEFT_OUT = "// {header}: left out by the sandbox's lean build (load_inline includes torch/types.h first)"
RAW_STRING = re.compile(r'\b(?:u8|u|U|L)?R"[^\s()\\"]{0,16}\(')
# What only the full header gives, evidently (fails to compile lean): pybind11, the Python C API, the C++
# frontend's namespaces beyond ATen's (``torch::cuda`` is not ``at::cuda``), used qualified or after a
# ``using namespace torch``.
NEEDS_FULL = re.compile(
    r"\bpybind11\b|(?<![\w:])py::|\bPYBIND11_\w+|\bPy[A-Z_]\w*|\b_Py\w+|\bTHP\w+|"
    r"\btorch::(?:nn|optim|autograd|jit|cuda|data|fft|linalg|special|nested|sparse|serialize|enumtype|python|"
    r"mps|xpu)\b|(?<![\w:])(?:nn|optim|jit|fft|linalg|special)::"
)
QUALIFIED = re.compile(r"\b(?:torch|at|c10)::([A-Za-z_]\w*)")
DEFINED = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)
BUILD_ERROR = "Error building extension"  # how torch's load_inline reports any failed ninja build


def enabled() -> bool:
    return os.environ.get(MODE_ENV, "1") != "0"


def joined(cuda_sources) -> str | None:
    """The CUDA source as load_inline writes it after its implicit headers (strings joined by newlines), or
    None when it is not a string or a list of strings (torch's own error then, as written: it inserts its
    headers into the list, so even a tuple fails)."""
    if isinstance(cuda_sources, str):
        return cuda_sources
    if isinstance(cuda_sources, list) and all(isinstance(s, str) for s in cuda_sources):
        return "\n".join(cuda_sources)
    return None


def rewrite(text: str) -> str | None:
    """``text`` with each line that only includes the full header turned into a comment (same line count), or
    None when there is no such line or one cannot be left out safely."""
    found = list(FULL_INCLUDE.finditer(text))
    if not found or RAW_STRING.search(text):
        return None
    if any(text[: m.start()].rstrip("\r\n").endswith("\\") for m in found if m.start()):
        return None  # continues the line before: not an include directive of its own
    return FULL_INCLUDE.sub(lambda m: LEFT_OUT.format(header=m.group(1)), text)


def why_as_written(text: str, names: FullHeaderNames | None) -> str | None:
    """Why ``text`` (a CUDA source with a removable include) must keep it, or None. ``names``: this
    toolchain's (``full_header_names.load``; None when unknown, and then always as written)."""
    code = NOT_CODE.sub(" ", text)
    needs = NEEDS_FULL.search(code)
    if needs:
        return f"uses {needs.group(0)!r}, which only the full header declares"
    if names is None:
        return "the full header's names are unknown for this toolchain"
    only_full = sorted({m.group(1) for m in QUALIFIED.finditer(code)} & names.names)
    if only_full:
        return f"uses {only_full[0]!r}, spelled only in headers only the full header includes"
    macros = sorted(code_identifiers(text) & names.macros)
    if macros:
        return f"mentions {macros[0]!r}, a macro only the full header defines"
    first = FULL_INCLUDE.search(text)
    head = NOT_CODE.sub(" ", text[: first.start()]) if first else ""
    clash = sorted({m.group(1) for m in DEFINED.finditer(head)} & (names.names | names.macros))
    if clash:
        return f"defines {clash[0]!r} before the include, a name the full header's headers use"
    return None


def lean_source(cuda_sources, kwargs: dict[str, Any], build_directory: Path) -> str | None:
    """The lean CUDA source when this build takes the lean path, else None (as written)."""
    if not cuda_sources or kwargs.get("no_implicit_headers"):
        return None
    text = joined(cuda_sources)
    lean = rewrite(text) if text is not None else None
    if lean is None:
        return None
    built = _read(build_directory / "cuda.cu")
    if built is not None:  # built before: keep its choice (ninja then rebuilds nothing)
        if built.endswith("\n" + lean):
            return lean
        if built.endswith("\n" + text):
            return None
    if not enabled():
        return None
    return None if why_as_written(text, _names()) else lean


def load_inline(call, name: str, cpp_sources, cuda_sources, kwargs: dict[str, Any], build_directory: Path):
    """``call(name, cpp_sources, cuda_sources, **kwargs)`` (torch's load_inline, as wrapped) through
    ``fast_build``: with the lean CUDA source where it applies, as written where not or where that failed."""
    lean = lean_source(cuda_sources, kwargs, build_directory)
    build = fast_build.load_inline
    if lean is None:
        written = (cpp_sources, cuda_sources, kwargs, build_directory)
        return cache.marked("headers", "as-written", build, call, name, *written)
    # torch extends list arguments in place (sources, extra_ldflags): the retry gets them as passed
    pristine = fast_build.copied(kwargs)
    lean_args = (fast_build.copied(cpp_sources), lean, fast_build.copied(kwargs), build_directory)
    try:
        return cache.marked("headers", "lean", build, call, name, *lean_args)
    except Exception as exc:
        if not str(exc).startswith(BUILD_ERROR):
            raise  # not a build (e.g. the built module failed to import): the as-written build is no answer
    fast_build.forget_version(name)
    written = (cpp_sources, cuda_sources, pristine, build_directory)
    return cache.marked("headers", "as-written-after-lean", build, call, name, *written)


def _names() -> FullHeaderNames | None:
    """This toolchain's full-header names, probed once into the sandbox cache (None without one)."""
    root = os.environ.get(SANDBOX_CACHE_ENV)
    return full_header_names.load(Path(root) / "torch_extensions" / "lean") if root else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
