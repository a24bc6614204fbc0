"""Generated solution sets, written on first use into the cache instead of living in git: the load_inline
throughput set (``load_inline_set``) and the load_inline variants of the fast-path solutions
(``load_inline_variants``). Generation is deterministic; the directory is named for a hash of the files'
contents, so an edited generator (or fast-path source) gets a fresh directory and a stale one is never read.
``BENCHMARKS_CACHE_DIR`` moves the cache (default ``~/.cache/cuda_agent_jax/benchmarks``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("BENCHMARKS_CACHE_DIR", "~/.cache/cuda_agent_jax/benchmarks")).expanduser()


def content_key(files: dict[str, str]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + files[rel].encode() + b"\0")
    return h.hexdigest()[:16]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text) under ``root`` as is (a directory the caller chose)."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def materialize(name: str, files: dict[str, str], root: Path | None = None) -> Path:
    """The directory holding ``files``: ``root`` when given (written there), else the cache's
    ``<name>-<content key>``, written once into a temporary sibling and renamed into place (two benchmarks
    starting together never see half a set)."""
    if root is not None:
        return write_tree(Path(root), files)
    target = cache_root() / f"{name}-{content_key(files)}"
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    write_tree(tmp, files)
    (tmp / ".complete").write_text("")
    try:
        tmp.rename(target)
    except OSError:  # another process finished first (or a partial directory without the marker is there)
        if not (target / ".complete").exists():
            shutil.rmtree(target, ignore_errors=True)
            tmp.rename(target)
            return target
        shutil.rmtree(tmp, ignore_errors=True)
    return target
