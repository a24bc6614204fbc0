"""The build hooks: ``torch.utils.cpp_extension``'s ``load_inline`` / ``load`` wrapped to record what a
solution built (``cache.BUILDS``), to make builds cache-only in the compile stage
(``KERNELS_ENV_BUILD_ONLY=1``), and to make ``load_inline`` builds content-addressed, through the shared PCH
(``pch``), the fast compiler flags (``fast_build``) and the lean CUDA source (``lean_headers``).

Compile errors of every builder are recognised in ``diagnostics.compile_error_messages``; which backends a
solution uses, in ``backends``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ...host.cuda import cuda_home
from . import cache, lean_headers, pch
from .cache import BUILD_ONLY_ENV, SANDBOX_CACHE_ENV, build_lock


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
        cache.BUILDS.append(entry)
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
    root = Path(os.environ[SANDBOX_CACHE_ENV]) / "torch_extensions" / "pch"
    with contextlib.suppress(OSError):  # an unwritable cache: build as the candidate asked, without it
        pch.apply(kwargs, build_directory, root, may_build=os.environ.get(BUILD_ONLY_ENV) == "1")


def extension_key(name: str, cpp_sources, cuda_sources, kwargs: dict[str, Any]) -> tuple[str, bool]:
    """(key, whether the module name is part of it) for a ``load_inline`` call."""
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
