"""Observers of fast-path builds: code that imports a candidate (the profiler's ``compile`` tool) sees every
``cuda_library`` / ``workspace_library`` / ``nvrtc_kernel`` call it makes, with the sources, flags, cached
artifact, ptxas resources and diagnostics the build really used, without patching the builders or
guessing their arguments.

    from kernels_env.fastpath.hooks import observe_builds

    with observe_builds() as builds:       # BuildEvent per build, appended as each finishes or fails
        import_the_candidate()

Observers run in the building thread after the build (a cache hit or a fresh build) and never change its
outcome: an observer that raises is ignored. With no observer registered a build pays nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from .diagnostics import CompileError, KernelResources


@dataclass
class BuildEvent:
    """One fast-path build as the candidate asked for it.

    ``sources``: display name (as diagnostics name it) -> text of every file a diagnostic can point to;
    ``options``: nvcc compile + link flags, or NVRTC options; ``artifact``: the cached ``.so`` / cubin
    (None when the build failed); ``diagnostics``: warnings of a successful build or the errors of a failed
    one (``error`` is then the ``CompileError`` the candidate's import raised).
    """

    kind: str  # cuda_library | nvrtc_kernel
    name: str
    arch: str
    sources: dict[str, str]
    options: list[str]
    artifact: str | None = None
    cache_hit: bool = False
    resources: list[KernelResources] = field(default_factory=list)
    diagnostics: list[dict] = field(default_factory=list)
    log: str = ""
    error: CompileError | None = None
    kernel: str | None = None  # nvrtc_kernel: the kernel (or template instance) asked for


_observers: list[Callable[[BuildEvent], None]] = []
_lock = threading.Lock()


@contextlib.contextmanager
def observe_builds() -> Iterator[list[BuildEvent]]:
    """Collect the builds made inside the ``with`` block (by any thread of this process)."""
    events: list[BuildEvent] = []
    observer = events.append
    with _lock:
        _observers.append(observer)
    try:
        yield events
    finally:
        with _lock:
            _observers.remove(observer)


def report(
    kind: str,
    name: str,
    arch: str,
    sources: Mapping[str, str],
    options: Sequence[str],
    *,
    meta: Mapping | None = None,
    cache_hit: bool = False,
    error: CompileError | None = None,
    kernel: str | None = None,
) -> None:
    """Called by the builders: ``meta`` of the cache entry on success, ``error`` on failure."""
    with _lock:
        observers = list(_observers)
    if not observers:
        return
    event = BuildEvent(kind, name, arch, dict(sources), list(options), cache_hit=cache_hit, kernel=kernel)
    if meta is not None:
        event.artifact = meta.get("path")
        event.resources = [KernelResources.from_dict(r) for r in meta.get("resources", [])]
        event.diagnostics = [dict(d) for d in meta.get("diagnostics", [])]
        event.log = meta.get("log", "")
    if error is not None:
        event.error = error
        event.diagnostics = [dict(d) for d in error.diagnostics]
        event.log = error.log
    for observer in observers:
        with contextlib.suppress(Exception):
            observer(event)
