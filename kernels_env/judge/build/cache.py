"""What every build path shares: the environment names that say where builds go and whether this process
only builds (the compile stage), ``BUILDS`` (what the current import built, by which path), and the lock
that lets one process at a time build into a directory.

A leaf: the build hooks, the fast and lean build paths and the agent workspace's build all use these, and
none of them is imported from here.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BUILD_ONLY_ENV = "KERNELS_ENV_BUILD_ONLY"
CACHE_DIR_ENV = "KERNELS_ENV_CACHE_DIR"  # the fast path's build cache
SANDBOX_CACHE_ENV = "KERNELS_ENV_SANDBOX_CACHE"  # the sandbox's cache root (baselines, torch_extensions, ...)
CUDA_ARCH_ENV = "KERNELS_ENV_CUDA_ARCH"  # e.g. "9.0": the target the run stage's GPU needs

# One record per load_inline/load call of the current import (``hooks.install_build_hooks``): builder, name,
# whether CUDA, wall seconds, success, and which paths built it (``fast_build``, ``lean_headers``). Read and
# replaced through the module (``cache.BUILDS``), never bound by name, so tests may swap the list.
BUILDS: list[dict[str, Any]] = []


@contextlib.contextmanager
def build_lock(build_dir: Path) -> Iterator[None]:
    """One builder per directory across processes. torch's own lock is a file (``build_dir/lock``) that a
    killed build (compile timeout) leaves behind, after which every later build of the key waits forever;
    under this flock (released by the kernel when its holder dies) any such file is stale and removed."""
    with open(build_dir / "kernels_env.flock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            (build_dir / "lock").unlink()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def marked(field: str, value: str, build, /, *args, **kwargs):
    """``build(*args, **kwargs)``, with ``field = value`` on the builds the build hooks recorded meanwhile
    (none without the hooks), whether it succeeded or not: ``path`` (fast_build) or ``headers``
    (lean_headers)."""
    first = len(BUILDS)
    try:
        return build(*args, **kwargs)
    finally:
        for entry in BUILDS[first:]:
            entry[field] = value
