"""The CUDA toolkit on this machine: its root and the programs the sandbox runs (nvcc, ncu,
compute-sanitizer, cuobjdump, nvdisasm), found one way for every caller.

The root is the first of ``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda`` and the toolkit around the
``nvcc`` on PATH that holds ``bin/nvcc`` (what ``load_inline`` runs) and ``include/cuda_runtime.h`` (what the
fast path compiles against); a root with the headers but no nvcc is the fallback. A program is found by its
override variable (when that names an existing file), then PATH, the root's ``bin``, ``/usr/local/cuda*/bin``
(newest first), then any extra places the caller names.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Iterable
from pathlib import Path


def _roots() -> list[str]:
    roots = [os.environ.get(var) for var in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    return [r for r in roots if r and os.path.isdir(r)]


def cuda_home() -> str | None:
    """The CUDA toolkit root (see the module doc), or None."""
    roots = _roots()
    headers = [r for r in roots if os.path.isfile(os.path.join(r, "include", "cuda_runtime.h"))]
    complete = [r for r in headers if os.path.isfile(os.path.join(r, "bin", "nvcc"))]
    return (complete or headers or [None])[0]


def find_cuda_tool(name: str, override_env: str | None = None, extra: Iterable[str] = ()) -> str | None:
    """The path of CUDA program ``name`` (see the module doc), or None."""
    override = os.environ.get(override_env) if override_env else None
    if override and Path(override).is_file():
        return override
    found = shutil.which(name)
    if found:
        return found
    home = cuda_home()
    places = [f"{home}/bin/{name}"] if home else []
    places += [
        f"/usr/local/cuda/bin/{name}",
        *sorted(glob.glob(f"/usr/local/cuda-*/bin/{name}"), reverse=True),
    ]
    return next((p for p in [*places, *extra] if Path(p).is_file()), None)
