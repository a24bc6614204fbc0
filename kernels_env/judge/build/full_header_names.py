"""What ``#include <torch/extension.h>`` adds to a load_inline CUDA source beyond the headers load_inline
already puts first (torch/types.h, cuda.h, cuda_runtime.h), as names: the macros only it defines, and the
identifiers spelled only in the headers only it includes (the torch C++ frontend's nn/optim/jit/...,
pybind11, Python.h and a few standard headers such as <valarray> and <stdarg.h>).

``lean_headers.py`` reads them to leave out the include only where that cannot change what a source means:
a macro only the full header defines can flip an ``#if`` without any error (``TORCH_VERSION_MAJOR`` is 0 in
an ``#if`` when undefined), and a macro the source defines before the include can break or change the
headers it would have reached. Names missing in the lean build otherwise fail to compile, and the lean
path then builds the source as written.

Found once per toolchain (torch, Python headers, nvcc and its host compiler) by preprocessing both preludes
with nvcc as load_inline's ninja file does (``-dM`` for the macros, and the list of headers read), then
scanning those headers: about 5 s in all. Kept in ``<sandbox cache>/torch_extensions/lean/<key>.json``; a
failure is kept as well (no lean builds with that toolchain: the names cannot be vouched for).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...host.cuda import cuda_home

# What torch's load_inline writes first into cuda.cu (``no_implicit_headers=False``).
IMPLICIT_HEADERS = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")
FULL_HEADER = "#include <torch/extension.h>"
PROBE_TIMEOUT_S = 300.0
DEFINE = re.compile(r"^#define ([A-Za-z_]\w*)(.*)$", re.M)
# Comments and string/char literals: their words are not code.
NOT_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*")


@dataclass(frozen=True)
class FullHeaderNames:
    macros: frozenset[str]  # defined (or defined otherwise) with torch/extension.h than without
    names: frozenset[str]  # identifiers of the headers only torch/extension.h includes, in no other header


def code_identifiers(text: str) -> set[str]:
    """The identifiers of C/C++ source ``text``, comments and literals left out."""
    return set(IDENTIFIER.findall(NOT_CODE.sub(" ", text)))


def load(root: Path) -> FullHeaderNames | None:
    """This toolchain's names (from ``root``, found now if missing), or None when they cannot be found."""
    import torch

    try:
        parts = [torch.__version__, sys.version, *_tools(), *probe_flags()]
    except OSError:  # no CUDA toolkit: nothing to build lean with
        return None
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    return _cached(str(root / f"{key}.json"))


@functools.lru_cache(maxsize=4)
def _cached(path: str) -> FullHeaderNames | None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "a") as lock:  # one prober at a time; the others read its file
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            try:
                found = {"macros": [], "names": [], **_probe()}
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                found = {"error": f"{type(exc).__name__}: {exc}"[:4000]}
            tmp = target.with_name(f".{target.name}.{os.getpid()}")
            tmp.write_text(json.dumps(found))
            os.replace(tmp, target)
    data = json.loads(target.read_text())
    if "error" in data:
        return None
    return FullHeaderNames(frozenset(data["macros"]), frozenset(data["names"]))


def _nvcc() -> str:
    import torch.utils.cpp_extension as ce

    home = ce.CUDA_HOME or cuda_home()
    if not home:
        raise OSError("no CUDA toolkit (nvcc) found")
    return os.path.join(home, "bin", "nvcc")


def _tools() -> list[str]:
    """nvcc and its host compiler, by path and file identity (an upgrade in place changes the key)."""
    import shutil

    out = []
    for tool in (_nvcc(), shutil.which(os.environ.get("CC") or "gcc") or "gcc"):
        with contextlib.suppress(OSError):
            st = os.stat(os.path.realpath(tool))
            tool = f"{os.path.realpath(tool)}:{st.st_size}:{st.st_mtime_ns}"
        out.append(tool)
    return out


def probe_flags() -> list[str]:
    """The flags of load_inline's nvcc command that decide what the preprocessor sees (its ninja file:
    ``_write_ninja_file_to_build_library``), without the extension's name (the headers never read it)."""
    import sysconfig

    import torch.utils.cpp_extension as ce

    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H"]
    for include in [*ce.include_paths("cpu"), sysconfig.get_path("include", scheme="posix_prefix")]:
        flags += ["-isystem", include]
    flags += [*getattr(ce, "COMMON_NVCC_FLAGS", []), f"-std={_cxx_standard()}"]
    if os.environ.get("CC"):
        flags = ["-ccbin", os.environ["CC"], *flags]
    return flags


@functools.lru_cache(maxsize=1)
def _cxx_standard() -> str:
    """The C++ standard torch's ninja file gives nvcc (it is spelled out in that function's source only:
    c++17 in older torch, c++20 in newer)."""
    import collections
    import inspect

    import torch.utils.cpp_extension as ce

    try:
        source = inspect.getsource(ce._write_ninja_file_to_build_library)
    except (AttributeError, OSError, TypeError):
        return "c++20"
    found = collections.Counter(re.findall(r"['\"]-std=(c\+\+\d+)['\"]", source)).most_common(1)
    return found[0][0] if found else "c++20"


def _probe() -> dict[str, list[str]]:
    with tempfile.TemporaryDirectory(prefix="lean-probe-") as tmp:
        lean = _preprocess(Path(tmp), "lean", list(IMPLICIT_HEADERS))
        full = _preprocess(Path(tmp), "full", [*IMPLICIT_HEADERS, FULL_HEADER])
    only_full = full[1] - lean[1]
    if not any(path.endswith("/torch/extension.h") for path in only_full):
        raise ValueError("nvcc's list of headers read does not show torch/extension.h")
    macros = sorted(name for name, body in full[0].items() if lean[0].get(name) != body)
    names = _identifiers(only_full) - _identifiers(lean[1])
    return {"macros": macros, "names": sorted(names)}


def _preprocess(tmp: Path, stem: str, lines: list[str]) -> tuple[dict[str, str], set[str]]:
    """({macro: definition}, {header path}) of a .cu holding ``lines``, through nvcc's host preprocessor."""
    source, deps = tmp / f"{stem}.cu", tmp / f"{stem}.d"
    source.write_text("\n".join(lines) + "\n")
    cmd = [_nvcc(), "-E", *probe_flags(), "-Xcompiler", "-dM", "-Xcompiler", f"-MD,-MF,{deps}", str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, cwd=tmp)
    if proc.returncode != 0 or not deps.is_file():
        raise ValueError(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    macros = {m.group(1): m.group(2).strip() for m in DEFINE.finditer(proc.stdout)}
    words = deps.read_text().replace("\\\n", " ").split()
    headers = {os.path.realpath(w) for w in words[1:] if not w.endswith(":") and w != str(source)}
    return macros, headers


def _identifiers(paths: set[str]) -> set[str]:
    out: set[str] = set()
    for path in paths:
        with contextlib.suppress(OSError):
            out |= code_identifiers(Path(path).read_text(errors="replace"))
    return out
