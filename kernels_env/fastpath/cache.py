"""Content-addressed, concurrency-safe store of built artifacts (shared libraries, cubins).

Layout under the root (``$KERNELS_ENV_CACHE_DIR``, default ``~/.cache/cuda_agent_jax/fastpath``)::

    entries/<key>/{<artifact>, meta.json}   complete builds; immutable once published
    locks/<key>.lock                        flock held while one process builds <key>
    tmp/                                    staging and work dirs of builds in progress

A build is staged in ``tmp/`` and published with one atomic ``rename`` of its directory, so a reader sees
a whole entry or none, and a killed build leaves only a stale ``tmp/`` dir (removed by later builds once
older than ``STALE_AFTER_S``). A process holding the key's lock builds; the others wait and then reuse its
entry. An entry whose meta does not parse or whose artifact's sha256 differs from the meta is discarded
and rebuilt.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

CACHE_ENV = "KERNELS_ENV_CACHE_DIR"
DEFAULT_CACHE = "~/.cache/cuda_agent_jax/fastpath"
STALE_AFTER_S = 6 * 3600
META = "meta.json"


def cache_root() -> Path:
    root = Path(os.path.expanduser(os.environ.get(CACHE_ENV) or DEFAULT_CACHE))
    for sub in ("entries", "locks", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def make_key(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def entry_dir(root: Path, key: str) -> Path:
    return root / "entries" / key


def _discard(root: Path, path: Path) -> None:
    trash = root / "tmp" / f"discard-{path.name[:16]}-{uuid.uuid4().hex[:8]}"
    with contextlib.suppress(OSError):
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)


def lookup(root: Path, key: str) -> dict | None:
    """The entry's meta when it is complete and intact; a damaged entry is discarded (None)."""
    path = entry_dir(root, key)
    if not path.exists():
        return None
    try:
        meta = json.loads((path / META).read_text())
        artifact = path / meta["artifact"]
        ok = meta.get("key") == key and artifact.stat().st_size == meta["size"]
        ok = ok and sha256_file(artifact) == meta["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        _discard(root, path)
        return None
    meta["path"] = str(path / meta["artifact"])
    return meta


@contextlib.contextmanager
def key_lock(root: Path, key: str, timeout_s: float):
    """Exclusive flock on the key (released by the kernel if the holder dies). Yields the seconds waited;
    after ``timeout_s`` it proceeds without the lock (publishing stays atomic, so that is still safe)."""
    start = time.monotonic()
    fd = os.open(root / "locks" / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    locked = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except BlockingIOError:
                if time.monotonic() - start > timeout_s:
                    break
                time.sleep(0.02)
        yield time.monotonic() - start
    finally:
        if locked:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def clean_stale(root: Path, max_age_s: float = STALE_AFTER_S) -> None:
    """Removes tmp/ dirs left by builds that were killed (older than any build can run)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for child in (root / "tmp").iterdir():
            with contextlib.suppress(OSError):
                if now - child.stat().st_mtime > max_age_s:
                    shutil.rmtree(child, ignore_errors=True)


def new_tmp_dir(root: Path, label: str) -> Path:
    path = root / "tmp" / f"{label}-{os.getpid()}-{uuid.uuid4().hex[:10]}"
    path.mkdir(parents=True)
    return path


def get_or_build(
    key: str, artifact: str, build: Callable[[Path], dict], timeout_s: float, root: Path | None = None
) -> tuple[dict, bool, float]:
    """(meta, cache_hit, seconds waited on another builder) for ``key``.

    ``build(staging_dir)`` writes ``staging_dir / artifact`` and returns the meta to record; it may raise
    (nothing is published then). ``meta['path']`` is the artifact's path inside the entry.
    """
    root = root or cache_root()
    meta = lookup(root, key)
    if meta is not None:
        return meta, True, 0.0
    with key_lock(root, key, timeout_s) as waited:
        meta = lookup(root, key)
        if meta is not None:  # another process built it while we waited
            return meta, True, waited
        clean_stale(root)
        staging = new_tmp_dir(root, f"stage-{key[:16]}")
        try:
            meta = dict(build(staging))
            art = staging / artifact
            meta.update(key=key, artifact=artifact, size=art.stat().st_size, sha256=sha256_file(art))
            meta.setdefault("created", time.time())
            (staging / META).write_text(json.dumps(meta, indent=1, default=str))
            try:
                os.rename(staging, entry_dir(root, key))
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                # Published concurrently by a builder that gave up waiting for the lock: keep theirs.
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    published = lookup(root, key)
    if published is None:
        raise RuntimeError(f"fastpath cache: entry {key[:16]} vanished right after it was built ({root})")
    return published, False, waited
