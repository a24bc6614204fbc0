"""The fast build path of ``load_inline``: output-neutral compiler flags that cut a build's CPU time.

A load_inline build of a KernelBench-style solution is three full parses of torch/extension.h (nvcc's
cudafe++ and cicc, then g++ over cudafe++'s 16 MB of host code) plus main.cpp; see
benchmarks/build_phases.py. A g++ PCH cannot serve the .cu (nvcc hands g++ cudafe++'s preprocessed output:
it would redefine every declaration); what the .cu parses shrinks only where its source lets the include go
(``lean_headers.py``: torch/types.h, which load_inline includes anyway, instead of the whole frontend,
pybind11 and Python.h), and this module's flags apply on top of either source. What can go everywhere
is GCC's garbage collector: on a translation unit that includes torch/extension.h it takes about a
tenth of g++'s time (``-ftime-report``: 3.3 of 32 s in the host pass), and the whole heap is ~2 GB. ``FLAGS``
keep it from running below 4 GB, in g++ for main.cpp (``extra_cflags``) and in nvcc's host compiler
(``-Xcompiler``, ``extra_cuda_cflags``). The collector only frees memory: object files are byte-identical
with and without (tests/sandbox/test_fast_build.py builds both). Measured on 2 cores (min of 3): the host
pass 24.3 -> 21.7 CPU-s, main.cpp 25.9 -> 23.3 without the shared PCH (none measurable with it): 2-5 of a
build's 94-108 CPU-s. The g++ passes peak ~0.5 GB higher (never above 4 GB or what they would peak at
anyway: well inside the worker's memory limit).

Used when both compilers are GCC: torch's C++ compiler, and nvcc's host compiler is the default ``gcc`` or
``$CC`` (torch passes ``-ccbin $CC``), not one chosen by the candidate's flags or nvcc's environment; and not
when ``KERNELS_ENV_FAST_BUILD=0``. A build directory that has a ``build.ninja`` keeps the flags it was
built with, so ninja sees the same commands (the run stage rebuilds nothing).

Fallback: a fast build whose log shows a failure the flags can cause (a compiler rejecting an option, or a
compiler that died or ran out of memory) is built again plain, exactly as the candidate asked. Any other
failure is the candidate's own: the flags change no diagnostic, and building every broken candidate twice
would cost more CPU than the fast path saves. ``cache.BUILDS`` records the path of each build: ``fast``,
``plain`` or ``plain-after-fast``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from . import cache
from .pch import _is_gcc

MODE_ENV = "KERNELS_ENV_FAST_BUILD"  # 1 (default) | 0
# No collection below 4 GB (KiB), then GCC's usual rule for a machine with 1 GB or more (collect when the heap
# has doubled since the last collection): a g++ peaks at most at max(4 GB, what it peaks at anyway).
FLAGS = ("--param=ggc-min-expand=100", "--param=ggc-min-heapsize=4194304")
CUDA_FLAGS = ("-Xcompiler", ",".join(FLAGS))
# The candidate (or nvcc's environment) picks nvcc's host compiler: it may not be GCC.
HOST_COMPILER = re.compile(r"^(?:-ccbin|--compiler-bindir)(?:=|$)")
NVCC_ENV = ("NVCC_CCBIN", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")
# Failures the flags can cause: a compiler rejecting an option (``g++: error: unrecognized command-line
# option``, ``cc1plus: error: invalid --param name``, ``nvcc fatal : Unknown option``) or dying. torch's
# message also holds each command ninja ran, flags and all, so a mere mention of the flags is not enough.
FLAG_ERROR = re.compile(
    r"(?:error|fatal)\s*:[^\n]*(?:ggc-min|--param|unknown argument|unrecognized (?:command[- ]line )?option|"
    r"unknown option)|Killed signal|died due to signal|out of memory|Cannot allocate memory|"
    r"virtual memory exhausted|bad_alloc|internal compiler error",
    re.I,
)


def enabled() -> bool:
    return os.environ.get(MODE_ENV, "1") != "0"


def gcc_toolchain(kwargs: dict[str, Any], cuda: bool) -> bool:
    """g++ compiles main.cpp and, for CUDA sources, GCC is nvcc's host compiler."""
    import torch.utils.cpp_extension as ce

    if not _is_gcc(ce.get_cxx_compiler()):
        return False
    if not cuda:
        return True
    words = [w for f in kwargs.get("extra_cuda_cflags") or [] for w in str(f).split()]  # "-ccbin x" is one
    if any(HOST_COMPILER.match(w) for w in words) or any(os.environ.get(k) for k in NVCC_ENV):
        return False
    return _is_gcc(os.environ.get("CC") or "gcc")


def fast_kwargs(kwargs: dict[str, Any], build_directory: Path, cuda: bool) -> dict[str, Any] | None:
    """The call's keyword arguments with ``FLAGS`` added (before the candidate's own flags: a ``--param``
    of its own still wins), or None when this build stays plain."""
    own = [kwargs.get("extra_cflags"), kwargs.get("extra_cuda_cflags")]
    if not all(f is None or isinstance(f, list | tuple) for f in own):
        return None  # torch would take a string apart character by character: leave that to it alone
    ninja = build_directory / "build.ninja"
    if ninja.is_file():  # built before: keep its flags (ninja then rebuilds nothing)
        if FLAGS[-1] not in ninja.read_text(errors="replace"):
            return None
    elif not enabled() or not gcc_toolchain(kwargs, cuda):
        return None
    out = {**kwargs, "extra_cflags": [*FLAGS, *(kwargs.get("extra_cflags") or [])]}
    if cuda:
        out["extra_cuda_cflags"] = [*CUDA_FLAGS, *(kwargs.get("extra_cuda_cflags") or [])]
    return out


def may_be_the_flags(exc: BaseException) -> bool:
    """Whether a failed fast build might build plain: a build error whose log shows a failure ``FLAGS``
    can cause (not, e.g., the candidate's syntax error, or a module that fails to import)."""
    text = str(exc)
    return text.startswith("Error building extension") and bool(FLAG_ERROR.search(text))


def load_inline(call, name: str, cpp_sources, cuda_sources, kwargs: dict[str, Any], build_directory: Path):
    """``call(name, cpp_sources, cuda_sources, **kwargs)`` (torch's load_inline, as wrapped) on the fast
    path where it applies, plain where not or where the fast build failed because of it."""
    fast = fast_kwargs(kwargs, build_directory, bool(cuda_sources))
    if fast is None:
        return cache.marked("path", "plain", call, name, cpp_sources, cuda_sources, **kwargs)
    # torch extends list arguments in place (a source list gets its implicit headers, extra_ldflags its
    # libraries): the retry gets them as the candidate passed them, as the run stage will (else main.cpp or
    # the link command differs and it rebuilds)
    pristine = copied(kwargs)
    try:
        return cache.marked("path", "fast", call, name, copied(cpp_sources), copied(cuda_sources), **fast)
    except Exception as exc:
        if not may_be_the_flags(exc):
            raise
    forget_version(name)  # else torch builds the plain retry as ``name_v1``, a name the run stage never asks
    return cache.marked("path", "plain-after-fast", call, name, cpp_sources, cuda_sources, **pristine)


def copied(value):
    """A list argument (or each list in a keyword dict) copied: torch's in-place changes stay in the copy."""
    if isinstance(value, dict):
        return {k: list(v) if isinstance(v, list) else v for k, v in value.items()}
    return list(value) if isinstance(value, list) else value


def forget_version(name: str) -> None:
    """Drop torch's per-process version of ``name``: a retry with other sources keeps the name."""
    import torch.utils.cpp_extension as ce

    entries = getattr(getattr(ce, "JIT_EXTENSION_VERSIONER", None), "entries", None)
    if isinstance(entries, dict):
        entries.pop(name, None)
