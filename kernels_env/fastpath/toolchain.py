"""Where the CUDA toolchain is and which version it is: nvcc, NVRTC, the target architecture, and the
headers and shared objects of CUDA libraries (cuBLAS, cuDNN, ...) from the toolkit or from pip wheels.

Environment: ``KERNELS_ENV_NVCC`` (the nvcc to run), ``CUDA_HOME``/``CUDA_PATH``, ``KERNELS_ENV_CUDA_ARCH``
(target, e.g. ``sm_90`` or ``sm_90a``), ``KERNELS_ENV_LIBRARY_PATH`` (extra ``:``-separated library dirs).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from ..host.cuda import cuda_home, find_cuda_tool
from . import _nvrtc_proc
from ._nvrtc_here import nvrtc_version_here
from .common import build_only

DEFAULT_ARCH = "sm_90"
ARCH_ENV = "KERNELS_ENV_CUDA_ARCH"
# Environment variables that change what nvcc produces, so they belong in the cache key.
NVCC_ENV = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
# Header that proves a library's development files are present.
_HEADERS = {
    "cublas": "cublas_v2.h",
    "cublasLt": "cublasLt.h",
    "cudnn": "cudnn.h",
    "curand": "curand.h",
    "cufft": "cufft.h",
    "cusparse": "cusparse.h",
    "cusolver": "cusolverDn.h",
}


def nvcc_path() -> str:
    found = find_cuda_tool("nvcc", "KERNELS_ENV_NVCC")
    if found is None:
        raise FileNotFoundError(
            "nvcc not found: install the CUDA toolkit or set CUDA_HOME / KERNELS_ENV_NVCC"
        )
    return found


@functools.cache
def _version_output(command: tuple[str, ...]) -> str:
    try:
        proc = subprocess.run(list(command), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}"
    return (proc.stdout + proc.stderr).strip()


def nvcc_version(nvcc: str | None = None) -> str:
    """``nvcc --version`` text (cached per process and nvcc path); part of every nvcc cache key."""
    return _version_output((nvcc or nvcc_path(), "--version"))


def nvcc_release(nvcc: str | None = None) -> str | None:
    m = re.search(r"release (\d+\.\d+), V([\d.]+)", nvcc_version(nvcc))
    return m.group(2) if m else None


def host_compiler_version() -> str:
    """The host C++ compiler nvcc will use (``NVCC_CCBIN`` or ``g++`` on PATH), first line of --version."""
    cxx = os.environ.get("NVCC_CCBIN") or shutil.which("g++") or "g++"
    return _version_output((cxx, "--version")).splitlines()[0] if cxx else "unknown"


@functools.cache
def nvrtc_version() -> str:
    """NVRTC's version and the wheel that ships it; part of every NVRTC cache key (asked in a fresh process
    in build-only mode, like every NVRTC call there: ``_nvrtc_proc``)."""
    if build_only():
        return _nvrtc_proc.run({"op": "version"})["version"]
    return nvrtc_version_here()


def normalize_arch(arch: str | int | tuple) -> str:
    """``90``, ``"9.0"``, ``(9, 0)``, ``"sm_90"``, ``"compute_90a"`` -> ``"sm_90"`` / ``"sm_90a"``."""
    if isinstance(arch, tuple):
        return f"sm_{arch[0]}{arch[1]}"
    text = str(arch).strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)(?:\.(\d))?([af]?)", text)
    if not m:
        raise ValueError(f"unrecognised CUDA architecture {arch!r} (expected e.g. 'sm_90' or 'sm_90a')")
    digits = m.group(1) + (m.group(2) or "")
    return f"sm_{digits}{m.group(3)}"


def resolve_arch(arch: str | int | tuple | None = None) -> str:
    """Target architecture: the argument, else ``$KERNELS_ENV_CUDA_ARCH``, else the current device when the
    caller's torch sees one, else ``sm_90``.

    torch is consulted only if the caller already imported it (a solution always has), so a compile
    worker with the GPU hidden gets the default: the sandbox exports ``KERNELS_ENV_CUDA_ARCH`` to both its
    compile and GPU workers so that their cache keys agree on any GPU.
    """
    if arch is not None:
        return normalize_arch(arch)
    env = os.environ.get(ARCH_ENV)
    if env:
        return normalize_arch(env)
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return normalize_arch(torch.cuda.get_device_capability())
        except Exception as exc:  # never guess: a wrong arch builds kernels that cannot run on this GPU
            raise RuntimeError(
                f"cannot read this GPU's compute capability ({type(exc).__name__}: {exc}); "
                f"set {ARCH_ENV} (for example sm_90) to build for a given architecture"
            ) from exc
    return DEFAULT_ARCH


def arch_flags(arch: str) -> list[str]:
    """nvcc flags: SASS for ``arch`` plus its PTX (so a newer GPU can still JIT it)."""
    sm = normalize_arch(arch)
    compute = "compute_" + sm[3:]
    return [f"-gencode=arch={compute},code=[{sm},{compute}]"]


# --- CUDA libraries -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaLibraryFiles:
    """How to compile and link against one library: ``-I include_dir``, ``-L lib_dir -l<link_name>``."""

    name: str
    lib_dir: str
    link_name: str  # value for -l: "cublas" or ":libcublas.so.13"
    include_dir: str | None
    path: str  # the shared object itself

    @property
    def link_flags(self) -> list[str]:
        return [f"-L{self.lib_dir}", f"-l{self.link_name}", f"-Xlinker=-rpath,{self.lib_dir}"]

    @property
    def host_link_flags(self) -> list[str]:
        """The same for a plain host linker (g++), e.g. ``load_inline(extra_ldflags=...)``."""
        return [f"-L{self.lib_dir}", f"-l{self.link_name}", f"-Wl,-rpath,{self.lib_dir}"]

    @property
    def fingerprint(self) -> str:
        """Identity of the linked file (path, size, mtime): a changed library gives a new cache key."""
        st = os.stat(self.path)
        return hashlib.sha256(
            f"{os.path.realpath(self.path)}:{st.st_size}:{st.st_mtime_ns}".encode()
        ).hexdigest()


def _site_dirs() -> list[str]:
    dirs = []
    for entry in sys.path:
        nvidia = os.path.join(entry, "nvidia")
        if os.path.isdir(nvidia):
            # CUDA 13 wheels share nvidia/cu13/{lib,include}; CUDA 12 wheels use nvidia/<lib>/{lib,include}.
            dirs += sorted(glob.glob(os.path.join(nvidia, "cu*")), reverse=True)
            dirs += sorted(glob.glob(os.path.join(nvidia, "*")))
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def _search_roots() -> list[str]:
    roots = [p for p in os.environ.get("KERNELS_ENV_LIBRARY_PATH", "").split(":") if p]
    home = cuda_home()
    if home:
        roots.append(home)
    roots += _site_dirs()
    roots += ["/usr", "/usr/local"]
    return roots


def _lib_dirs(root: str) -> list[str]:
    subs = ["lib64", "lib", "targets/x86_64-linux/lib", "lib/x86_64-linux-gnu", "targets/sbsa-linux/lib"]
    if os.path.basename(root.rstrip("/")) in ("lib", "lib64"):
        return [root]
    return [os.path.join(root, s) for s in subs if os.path.isdir(os.path.join(root, s))] + [root]


def _include_dirs(root: str) -> list[str]:
    subs = ["include", "targets/x86_64-linux/include", "targets/sbsa-linux/include"]
    return [os.path.join(root, s) for s in subs if os.path.isdir(os.path.join(root, s))]


def _version_key(path: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", path.rsplit(".so", 1)[-1]))


def find_cuda_library(name: str) -> CudaLibraryFiles | None:
    """Locate ``lib<name>.so`` (toolkit first, then pip ``nvidia-*`` wheels, then /usr) and its header.

    A library with a known header (cublas, cudnn, ...) is only accepted where the header is found too.
    Returns None when nothing usable is found.
    """
    header = _HEADERS.get(name)
    for root in _search_roots():
        include = None
        if header:
            include = next((d for d in _include_dirs(root) if os.path.isfile(os.path.join(d, header))), None)
            if include is None:
                continue
        for lib_dir in _lib_dirs(root):
            plain = os.path.join(lib_dir, f"lib{name}.so")
            if os.path.exists(plain):
                return CudaLibraryFiles(name, lib_dir, name, include, plain)
            versioned = sorted(glob.glob(os.path.join(lib_dir, f"lib{name}.so.*")), key=_version_key)
            versioned = [
                v for v in versioned if re.fullmatch(rf"lib{re.escape(name)}\.so\.\d+", os.path.basename(v))
            ]
            if versioned:
                path = versioned[-1]
                return CudaLibraryFiles(name, lib_dir, ":" + os.path.basename(path), include, path)
    return None


def cuda_include_dirs() -> list[str]:
    """Toolkit include dirs for NVRTC (cuda_fp16.h, cuda_bf16.h, cuda/std/...)."""
    home = cuda_home()
    dirs = []
    if home:
        for d in _include_dirs(home):
            dirs.append(d)
            if os.path.isdir(os.path.join(d, "cccl")):
                dirs.append(os.path.join(d, "cccl"))
    return dirs
