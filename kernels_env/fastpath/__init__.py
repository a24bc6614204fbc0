"""Fast CUDA path: build CUDA sources without torch headers in about a second; call them on torch tensors.

    from kernels_env.fastpath import cuda_library, nvrtc_kernel, CompileError

    lib = cuda_library({"relu.cu": SRC}, name="relu")        # nvcc -> cached .so -> ctypes
    lib.relu_launch(x, out, x.numel())                        # trailing cudaStream_t filled in
    k = nvrtc_kernel(SRC, "relu_kernel")                      # NVRTC (CuPy) -> cached cubin
    k(grid, block, (x, out, n), shared_mem=0)                 # on torch's current stream

Conventions (docs/fastpath.md has the full text):

* Entry points of a ``cuda_library`` are ``extern "C"`` host functions, found by parsing the sources (or
  given with ``signatures=``). Launchers return ``int`` or ``cudaError_t``: 0 is success, anything else
  raises ``RuntimeError`` with ``cudaGetErrorString``. After every call the CUDA runtime's last error is
  read (and cleared) too, so a launcher that forgets to check its launch still fails loudly. Other
  return types (``void``, ``float``, ...) are returned as values.
* Arguments: CUDA tensors for pointers (contiguous, current device, dtype matching the pointee), Python
  numbers for scalars (range-checked), and a trailing ``cudaStream_t`` that may be omitted (torch's
  current stream). Kernel launches are asynchronous: errors of a running kernel (illegal address) surface
  at the next synchronising call.
* Build cache: ``$KERNELS_ENV_CACHE_DIR`` (default ``~/.cache/cuda_agent_jax/fastpath``), keyed by every
  source and hashed header, flags, arch, libraries, toolchain version and ``FASTPATH_VERSION``; safe for
  concurrent processes and killed builds. ``KERNELS_ENV_BUILD_ONLY=1``: compile and cache, never load
  (handles whose calls raise); ``KERNELS_ENV_CUDA_ARCH``: target arch (default: the current GPU, else sm_90).

May import: the standard library, torch and cupy (both lazily, at load/launch time). Never jax, hydra,
``models`` or ``research``.
"""

from .cache import cache_root
from .common import BUILD_ONLY_ENV, FASTPATH_VERSION, BuildInfo, build_only
from .diagnostics import CompileError, KernelResources, parse_diagnostics, parse_ptxas_resources
from .library import CudaLibrary, LauncherFunction, cuda_library, workspace_library
from .nvrtc import NvrtcKernel, nvrtc_kernel
from .prototypes import Param, Prototype, parse_extern_c, parse_kernels, parse_signature
from .toolchain import find_cuda_library, resolve_arch

__all__ = [
    "BUILD_ONLY_ENV",
    "FASTPATH_VERSION",
    "BuildInfo",
    "CompileError",
    "CudaLibrary",
    "KernelResources",
    "LauncherFunction",
    "NvrtcKernel",
    "Param",
    "Prototype",
    "build_only",
    "cache_root",
    "cuda_library",
    "find_cuda_library",
    "nvrtc_kernel",
    "parse_diagnostics",
    "parse_extern_c",
    "parse_kernels",
    "parse_ptxas_resources",
    "parse_signature",
    "resolve_arch",
    "workspace_library",
]
