"""Kernel builds seen from the harness: recognise every builder's compile errors, record what a solution
built, and make builds cache-only in the compile stage (``KERNELS_ENV_BUILD_ONLY=1``).

Builders: ``kernels_env.fastpath`` (its ``CompileError`` is recognised by duck typing: a ``CompileError``
with ``.diagnostics`` and ``.log``, so this module does not import it), ``torch.utils.cpp_extension``
(``load_inline`` / ``load``), Triton (``CompilationError``), and CuPy/NVRTC.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..host.cuda import cuda_home
from ..rules.result import message
from .diagnostics import format_diagnostic, parse_compiler_output, truncate
from .toolchains import KITTENS_INCLUDE, TOOLCHAINS, imported_modules

BUILD_ONLY_ENV = "KERNELS_ENV_BUILD_ONLY"
CACHE_DIR_ENV = "KERNELS_ENV_CACHE_DIR"  # the fast path's build cache
SANDBOX_CACHE_ENV = "KERNELS_ENV_SANDBOX_CACHE"  # the sandbox's cache root (baselines, torch_extensions, ...)
CUDA_ARCH_ENV = "KERNELS_ENV_CUDA_ARCH"  # e.g. "9.0": the target the run stage's GPU needs

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
# KernelBench's other backends (``kernels_env.judge.toolchains``): CuTe DSL, TileLang, ThunderKittens.
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


def compile_error_messages(exc: BaseException, aliases: Mapping[str, str]) -> tuple[str, list[dict]] | None:
    """(one-line error, messages) when ``exc`` is a compile error of a known builder, else None."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if name == "CompileError" and hasattr(exc, "diagnostics"):  # kernels_env.fastpath or compatible
        diags = [dict(d) for d in (getattr(exc, "diagnostics", None) or []) if isinstance(d, Mapping)]
        log = str(getattr(exc, "log", "") or "")
        diags = _renamed(diags, aliases) if diags else parse_compiler_output(log, aliases)
        return _summarise("CUDA compilation failed", diags, log or str(exc))
    text = str(exc)
    if isinstance(exc, RuntimeError) and text.startswith("Error building extension"):
        return _summarise(text.split(":", 1)[0], parse_compiler_output(text, aliases), text)
    if name == "CompilationError" and module.startswith("triton"):
        diag = {
            "file": "triton",
            "line": None,
            "column": None,
            "severity": "error",
            "message": truncate(text, 2000),
        }
        return "Triton compilation failed: " + _first_line(text), [
            message("compiler", diag["message"], **diag)
        ]
    if module.startswith("cupy") and "CompileException" in name:
        return _summarise("NVRTC compilation failed", parse_compiler_output(text, aliases), text)
    return None


def _renamed(diags: list[dict], aliases: Mapping[str, str]) -> list[dict]:
    out = []
    for d in diags:
        d = {k: d.get(k) for k in ("file", "line", "column", "severity", "message")}
        for prefix, alias in aliases.items():
            if prefix and isinstance(d["file"], str) and d["file"].startswith(prefix):
                d["file"] = alias + d["file"][len(prefix) :]
        out.append(d)
    return out


def _summarise(title: str, diags: list[dict], log: str) -> tuple[str, list[dict]]:
    errors = [d for d in diags if d.get("severity") == "error"] or diags
    error = f"{title}: {format_diagnostic(errors[0])}" if errors else f"{title}: {_first_line(log)}"
    messages = [message("compiler", format_diagnostic(d), **d) for d in diags]
    messages.append(message("log", truncate(log)))
    return error, messages


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


class BuildOnlyModule:
    """What a build returns in the compile stage: it exists (attributes resolve) but calling raises."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def not_callable(*args, **kwargs):
            raise RuntimeError(
                f"{self._name}.{attr}: built only ({BUILD_ONLY_ENV}=1); it runs in the run stage"
            )

        return not_callable


BUILDS: list[dict[str, Any]] = []


def install_build_hooks(build_only: bool, cache_dir: str) -> None:
    """Record load_inline/load calls; in build-only mode compile and cache but never load the library.

    With a CPU-only torch the CUDA sources still compile: CUDA_HOME is pointed at nvcc and the CUDA libraries
    torch would link against are replaced by empty stubs (the result is never loaded).
    """
    import torch
    import torch.utils.cpp_extension as ce

    cpu_torch = torch.version.cuda is None
    orig_inline, orig_load = ce.load_inline, ce.load

    def _prepare(kwargs: dict[str, Any], cuda: bool) -> None:
        if cuda and cpu_torch and build_only:
            if ce.CUDA_HOME is None:
                ce.CUDA_HOME = cuda_home()
            stubs = cpu_link_stubs(cache_dir)
            kwargs["extra_ldflags"] = [*(kwargs.get("extra_ldflags") or []), f"-L{stubs}"]

    def recorded(entry: dict[str, Any], build):
        """Run ``build`` with ``entry`` in BUILDS: its wall seconds, whether it succeeded (``path``, the
        fast build path's, is ``plain`` unless fast_build says otherwise; ``headers`` is ``as-written``
        unless lean_headers says otherwise)."""
        entry.update(path="plain", headers="as-written", ok=False)
        BUILDS.append(entry)
        started = time.perf_counter()
        try:
            result = build()
            entry["ok"] = True
            return result
        finally:
            entry["s"] = round(time.perf_counter() - started, 3)

    @functools.wraps(orig_inline)
    def load_inline(name, cpp_sources, cuda_sources=None, *args, **kwargs):
        cuda = bool(cuda_sources)
        use_pch = bool(kwargs.get("use_pch"))
        _prepare(kwargs, cuda)
        entry = {"builder": "load_inline", "name": name, "cuda": cuda, "use_pch": use_pch}
        return recorded(entry, lambda: orig_inline(name, cpp_sources, cuda_sources, *args, **kwargs))

    @functools.wraps(orig_load)
    def load(name, sources, *args, **kwargs):
        srcs = [sources] if isinstance(sources, str | os.PathLike) else list(sources)
        cuda = any(str(s).endswith((".cu", ".cuh")) for s in srcs)
        _prepare(kwargs, cuda)
        entry = {"builder": "cpp_extension", "name": name, "cuda": cuda}
        return recorded(entry, lambda: orig_load(name, sources, *args, **kwargs))

    ce.load_inline, ce.load = load_inline, load
    if build_only and hasattr(ce, "_import_module_from_library"):
        ce._import_module_from_library = lambda module_name, path, is_python_module: BuildOnlyModule(
            module_name
        )


KEYED_MARK = "_kernels_env_content_keyed"
HARDCODED_MODULE = re.compile(r"PYBIND11_MODULE\s*\(\s*(?!TORCH_EXTENSION_NAME\b)\w+\s*,")


def content_keyed_extensions() -> None:
    """Make ``load_inline`` builds content-addressed (idempotent; compile stage, run worker and tools alike).

    Same sources, functions and flags => the same build directory (``<sandbox cache>/torch_extensions/
    content/<key>``) and the same module name (``kx_<key>``), whatever name the candidate gave its extension
    and whatever file it lives in: a second candidate with an identical extension loads the built .so. The
    module name enters the key only when the source spells it out in ``PYBIND11_MODULE`` (renaming would
    break its init symbol). A ``build_directory`` the candidate chose is used as is (the build paths below
    apply there too). What the code computes is unchanged: only the name of the .so and where it is built
    differ. Builds use the sandbox's shared
    precompiled torch/extension.h (``pch.py``) where torch supports ``use_pch`` and the candidate allows it,
    the fast path's output-neutral compiler flags (``fast_build.py``) where the compilers are GCC, and the
    CUDA source without its torch/extension.h include where it needs nothing more (``lean_headers.py``).
    """
    import torch.utils.cpp_extension as ce

    current = ce.load_inline
    if getattr(current, KEYED_MARK, False) or not os.environ.get(SANDBOX_CACHE_ENV):
        return

    signature = inspect.signature(current)  # follows functools.wraps to torch's own
    from . import lean_headers, pch

    use_pch = pch.supported(current)
    if use_pch:  # torch would build its own PCH inside its install directory; the shared one serves instead
        ce._check_and_build_extension_h_precompiler_headers = pch.torch_pch_hook

    @functools.wraps(current)
    def load_inline(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return current(*args, **kwargs)  # torch reports the bad call in its own words
        kwargs = dict(bound.arguments)
        name, cpp_sources = kwargs.pop("name"), kwargs.pop("cpp_sources")
        cuda_sources = kwargs.pop("cuda_sources", None)
        if kwargs.get("build_directory"):
            directory = Path(kwargs["build_directory"])
            _shared_pch(kwargs, directory, use_pch)
            return lean_headers.load_inline(current, name, cpp_sources, cuda_sources, kwargs, directory)
        # Keyed on the candidate's own arguments: the PCH, the fast path's flags and the lean CUDA source
        # change how fast the .so is built, not what it computes.
        key, keep_name = extension_key(name, cpp_sources, cuda_sources, kwargs)
        directory = Path(os.environ[SANDBOX_CACHE_ENV]) / "torch_extensions" / "content" / key
        directory.mkdir(parents=True, exist_ok=True)
        from .agent_extension import build_lock

        module = name if keep_name else f"kx_{key}"
        with build_lock(directory):
            _shared_pch(kwargs, directory, use_pch)
            kwargs["build_directory"] = str(directory)
            return lean_headers.load_inline(current, module, cpp_sources, cuda_sources, kwargs, directory)

    setattr(load_inline, KEYED_MARK, True)
    ce.load_inline = load_inline


def _shared_pch(kwargs: dict[str, Any], build_directory: Path, supported: bool) -> None:
    """``use_pch=True`` with the sandbox's shared PCH (``pch.py``), when torch supports it and the candidate
    left ``use_pch`` unset (or set it); only the compile stage builds a missing PCH."""
    if not supported:
        return
    from . import pch

    root = Path(os.environ[SANDBOX_CACHE_ENV]) / "torch_extensions" / "pch"
    with contextlib.suppress(OSError):  # an unwritable cache: build as the candidate asked, without it
        pch.apply(kwargs, build_directory, root, may_build=os.environ.get(BUILD_ONLY_ENV) == "1")


def extension_key(name: str, cpp_sources, cuda_sources, kwargs: dict[str, Any]) -> tuple[str, bool]:
    """(key, whether the module name is part of it) for a ``load_inline`` call."""
    import hashlib
    import sys

    import torch

    def texts(value) -> list[str]:
        return [value] if isinstance(value, str) else [str(v) for v in (value or [])]

    code = texts(cpp_sources) + ["\0cuda\0"] + texts(cuda_sources)
    keep_name = any(HARDCODED_MODULE.search(t) for t in code)
    env = [os.environ.get(k, "") for k in ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CXX", "CC")]
    parts = [*code, repr(sorted(kwargs.items(), key=lambda kv: kv[0])), torch.__version__, *env, sys.version]
    if keep_name:
        parts.append(name)
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:24], keep_name


def cpu_link_stubs(cache_dir: str) -> str:
    """Empty libc10_cuda.so / libtorch_cuda.so so a CPU-only torch can link (never load) CUDA extensions."""
    stubs = Path(cache_dir) / "cpu_link_stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    for lib in ("libc10_cuda.so", "libtorch_cuda.so"):
        target = stubs / lib
        if not target.exists():
            tmp = stubs / f".{lib}.{os.getpid()}"
            subprocess.run(["cc", "-shared", "-o", str(tmp), "-x", "c", "/dev/null"], check=True, timeout=60)
            os.replace(tmp, target)
    return str(stubs)
