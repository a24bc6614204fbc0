"""What the library and kernel handles share: the build record, build-only mode, GPU availability."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# Bump when anything that shapes a cached artifact changes (flags, support code, layout): old entries
# then stop matching and are never reused.
FASTPATH_VERSION = "2"  # 2: NVRTC cubins stored whole (CuPy's getCUBIN drops their last byte)
BUILD_ONLY_ENV = "KERNELS_ENV_BUILD_ONLY"


def build_only() -> bool:
    """``KERNELS_ENV_BUILD_ONLY=1``: compile and fill the cache, never load (the sandbox's CPU workers)."""
    return os.environ.get(BUILD_ONLY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def cuda_unavailable_reason() -> str | None:
    """Why artifacts cannot be loaded in this process (None when a CUDA device is usable)."""
    if build_only():
        return f"built only ({BUILD_ONLY_ENV}=1): this process compiles and caches, it does not load or run"
    try:
        import torch
    except ImportError:
        return "torch is not installed: the fast path launches on torch tensors"
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return (
            f"no CUDA device is visible{hint}: the library was compiled and cached but cannot run here; "
            f"set {BUILD_ONLY_ENV}=1 to only compile"
        )
    return None


@dataclass
class BuildInfo:
    """How an artifact was obtained by one ``cuda_library`` / ``nvrtc_kernel`` call.

    ``seconds``: wall time of the call (hashing, cache lookup or compile, load); ``compile_seconds``: time
    spent compiling in this call (0.0 on a cache hit); ``built_seconds``: how long the cached artifact took
    to compile when it was built; ``waited_seconds``: time spent waiting for another process building the
    same key.
    """

    key: str
    cache_hit: bool
    seconds: float
    compile_seconds: float
    built_seconds: float
    waited_seconds: float
    artifact: str
    arch: str
    toolchain: str
    log: str = ""
    diagnostics: list[dict] = field(default_factory=list)
    loaded: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)
