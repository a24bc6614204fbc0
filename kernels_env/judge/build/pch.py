"""A precompiled ``torch/extension.h`` shared by every ``load_inline`` build of the sandbox.

torch's own ``load_inline(use_pch=True)`` writes ``extension.h.gch`` next to the header in torch's install
directory: one file for every process on the machine, rebuilt in place (a concurrent build can read half a
file) and deleted by the next call with ``use_pch=False``. Here the header is precompiled once per compiler,
torch version and candidate flags (``extra_cflags``, ``extra_include_paths``: g++ rejects a PCH built with
other options) into ``<sandbox cache>/torch_extensions/pch/<key>/torch/extension.h.gch``, published by an
atomic rename under an flock, and found by g++ through one more ``-I`` (it looks for ``NAME.gch`` in each
include directory before ``NAME``). The flags are the ones torch's ninja file gives ``main.cpp``, so the
object code is the same with or without it; a PCH g++ finds unsuitable is ignored (the build just is slower).

A PCH of torch/extension.h takes a minute or more (and about 0.8 GB) to build, longer than many compile
budgets, so by default (``KERNELS_ENV_PCH=background``) the first build that wants one starts it in a
detached process and builds without it; later builds use it. ``wait`` builds it in the caller (torch's
behaviour), ``off`` never uses one. Only the compile stage builds one (``KERNELS_ENV_BUILD_ONLY=1``); the
GPU worker uses a ready one or none. A build directory that already has a ``build.ninja`` keeps the choice it
was built with, so ninja sees the same command and rebuilds nothing.

This file also runs as a script (``python -I pch.py --detach ARGS_JSON``): the detached builder, stdlib only
(``-I``: the judge's directory must not shadow the standard library).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

MODE_ENV = "KERNELS_ENV_PCH"  # background (default) | wait | off
HEADER = ("torch", "extension.h")
BUILD_TIMEOUT_S = 900.0  # a detached build that takes longer is given up (the next build may retry)


def supported(load_inline) -> bool:
    """torch's load_inline takes ``use_pch`` (torch >= 2.5) and the C++ compiler is g++ on Linux."""
    import inspect

    import torch.utils.cpp_extension as ce

    try:
        has_flag = "use_pch" in inspect.signature(load_inline).parameters
    except (TypeError, ValueError):
        return False
    return has_flag and sys.platform.startswith("linux") and _is_gcc(ce.get_cxx_compiler())


@functools.lru_cache(maxsize=4)
def _is_gcc(compiler: str) -> bool:
    import torch.utils.cpp_extension as ce

    return bool(getattr(ce, "check_compiler_is_gcc", lambda c: False)(compiler))


@functools.lru_cache(maxsize=4)
def _compiler_identity(compiler: str) -> str:
    """g++ accepts a PCH only from the same compiler binary: its path and version are part of the key."""
    try:
        out = subprocess.run([compiler, "-v"], capture_output=True, text=True, timeout=30)
        return compiler + "\0" + out.stderr
    except (OSError, subprocess.SubprocessError):
        return compiler


def pch_command(extra_cflags, extra_include_paths, output: str) -> list[str]:
    """The g++ command that precompiles torch/extension.h with the flags torch's ninja file gives main.cpp
    (``_write_ninja_file_to_build_library``) but ``-DTORCH_EXTENSION_NAME``, which the header never reads."""
    import sysconfig

    import torch.utils.cpp_extension as ce

    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H"]
    for name in ("_get_pybind11_abi_build_flags", "_get_glibcxx_abi_build_flags"):
        flags += list(getattr(ce, name, lambda: [])())
    flags += [f"-I{os.path.abspath(p.strip())}" for p in extra_include_paths or []]
    system = list(ce.include_paths("cpu")) + [sysconfig.get_path("include", scheme="posix_prefix")]
    for include in system:
        flags += ["-isystem", include]
    flags += ["-fPIC", "-std=c++20", *[f.strip() for f in extra_cflags or []]]
    header = os.path.join(ce.include_paths("cpu")[0], *HEADER)
    return [ce.get_cxx_compiler(), "-x", "c++-header", header, "-o", output, *flags]


def pch_dir(root: Path, extra_cflags, extra_include_paths) -> Path:
    """The include directory whose ``torch/extension.h.gch`` serves builds with these flags."""
    import torch
    import torch.utils.cpp_extension as ce

    cmd = pch_command(extra_cflags, extra_include_paths, "OUT")
    parts = [*cmd, torch.__version__, sys.version, _compiler_identity(ce.get_cxx_compiler())]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    return root / key


def gch_path(directory: Path) -> Path:
    return directory.joinpath(*HEADER[:-1], HEADER[-1] + ".gch")


def ready_or_start(root: Path, extra_cflags, extra_include_paths, may_build: bool) -> Path | None:
    """The include directory of a ready PCH for these flags, or None (then, if ``may_build``, one is being
    built: detached, or here and now in ``wait`` mode)."""
    mode = os.environ.get(MODE_ENV, "background")
    if mode == "off":
        return None
    directory = pch_dir(root, extra_cflags, extra_include_paths)
    if gch_path(directory).is_file():
        return directory
    if not may_build or (directory / "failed.log").exists():  # a failed PCH is not retried for every build
        return None
    directory.mkdir(parents=True, exist_ok=True)
    args = {"dir": str(directory), "cmd": pch_command(extra_cflags, extra_include_paths, "OUT")}
    if mode == "wait":
        build(args, block=True)
        return directory if gch_path(directory).is_file() else None
    _detach(args)
    return None


def _detach(args: dict[str, Any]) -> None:
    """Start the builder outside the caller's process tree (the compile stage kills its child's whole tree
    when the child is done; a shared PCH must outlive the candidate that asked for it)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [sys.executable, "-I", __file__, "--detach", json.dumps(args)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )


def build(args: dict[str, Any], block: bool) -> None:
    """Build the PCH once: under an flock (a held lock means someone is building it; without ``block`` do
    not wait), into a temporary file renamed into place, so a reader sees the whole file or none."""
    directory = Path(args["dir"])
    target = gch_path(directory)
    with open(directory / "build.flock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            return
        if target.is_file():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in target.parent.glob("*.tmp"):  # left by a builder that was killed
            stale.unlink(missing_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        cmd = [str(tmp) if part == "OUT" else part for part in args["cmd"]]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            tmp.unlink(missing_ok=True)
            return
        if proc.returncode == 0 and tmp.is_file():
            os.replace(tmp, target)
        else:
            tmp.unlink(missing_ok=True)
            (directory / "failed.log").write_text(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)


def apply(kwargs: dict[str, Any], build_directory: Path | None, root: Path, may_build: bool) -> bool:
    """Add ``use_pch=True`` and the shared PCH's include directory to a load_inline call's keyword
    arguments when a PCH is ready and the candidate did not choose ``use_pch`` itself. True if applied."""
    if "use_pch" in kwargs and not kwargs["use_pch"]:
        return False  # the candidate said no
    if kwargs.get("no_implicit_headers"):
        return False  # torch does not start main.cpp with torch/extension.h: nothing a PCH could serve
    cflags, includes = kwargs.get("extra_cflags"), kwargs.get("extra_include_paths")
    ninja = build_directory / "build.ninja" if build_directory else None
    if ninja is not None and ninja.is_file():  # built before: keep its choice (ninja then rebuilds nothing)
        directory = pch_dir(root, cflags, includes)
        if f"-I{directory}" not in ninja.read_text(errors="replace"):
            return False
    else:
        directory = ready_or_start(root, cflags, includes, may_build)
        if directory is None:
            return False
    kwargs["use_pch"] = True
    # Last of the candidate's include directories: one of its own holding torch/extension.h still wins.
    kwargs["extra_include_paths"] = [*(includes or []), str(directory)]
    return True


def torch_pch_hook(*args, **kwargs) -> None:
    """Replaces torch's ``_check_and_build_extension_h_precompiler_headers``: with ``use_pch=True`` torch
    would (re)build a PCH in its own install directory; ``apply`` has already provided the shared one."""


if __name__ == "__main__":  # the detached builder: ``--detach ARGS`` forks it off, ``--build ARGS`` builds
    if sys.argv[1] == "--detach":
        subprocess.Popen(
            [sys.executable, "-I", __file__, "--build", sys.argv[2]],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    else:
        build(json.loads(sys.argv[2]), block=False)
