"""What the soak checks for leaks: this process's descendants before and after the client, the sandbox's
private ``TMPDIR``, and the worker starts beyond the initial ones (restarts per role)."""

from __future__ import annotations

import collections
import contextlib
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path


# leaks ------------------------------------------------------------------------------------------------------
def descendants() -> set[int]:
    import psutil

    with contextlib.suppress(psutil.Error):
        return {p.pid for p in psutil.Process().children(recursive=True)}
    return set()


@contextlib.contextmanager
def private_tmpdir():
    """A fresh ``TMPDIR`` for this process and everything it starts (the workers inherit the environment)."""
    root = tempfile.mkdtemp(prefix="kernels_env_soak_tmp-")
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = root
    tempfile.tempdir = None  # recomputed from TMPDIR
    try:
        yield Path(root)
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
        tempfile.tempdir = None


def describe(pid: int) -> str:
    """What a leaked process was (its command line, parent and age), so a leak seen once can be traced."""
    import psutil

    try:
        p = psutil.Process(pid)
        with p.oneshot():
            cmd = " ".join(p.cmdline())[:200] or p.name()
            return f"{cmd} (parent {p.ppid()}, {time.time() - p.create_time():.0f} s old, {p.status()})"
    except psutil.Error as exc:
        return f"gone by the report ({type(exc).__name__})"


def settle_descendants(before: set[int], timeout_s: float = 15.0) -> set[int]:
    """Descendants started since ``before`` still alive after ``timeout_s`` (workers exit asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        extra = descendants() - before
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.25)


class StartCounter:
    """Counts worker restarts by role and times them: ``Worker.start`` runs once per worker slot (a standby
    is a slot of its own) and again on the same object for every restart."""

    def __init__(self) -> None:
        from kernels_env.runtime import supervisor

        self.starts: dict[int, list] = {}  # id(worker) -> [role, starts, [seconds of each restart]]
        self._lock = threading.Lock()
        original = supervisor.Worker.start
        self._restore = lambda: setattr(supervisor.Worker, "start", original)

        def start(worker, *args, **kwargs):
            with self._lock:
                entry = self.starts.setdefault(id(worker), [worker.role, 0, []])
                entry[1] += 1
                again = entry[1] > 1
            t0 = time.perf_counter()
            try:
                return original(worker, *args, **kwargs)
            finally:
                if again:  # a restart (process start to its hello): what a crash costs its worker slot
                    with self._lock:
                        entry[2].append(time.perf_counter() - t0)

        supervisor.Worker.start = start

    def restarts(self) -> dict[str, int]:
        out: collections.Counter = collections.Counter()
        for role, starts, _ in self.starts.values():
            out[role] += starts - 1
        return dict(out)

    def restart_seconds(self) -> dict[str, dict]:
        """Per role: how long a restart took (median, max) and in all (seconds of a worker slot)."""
        by_role: dict[str, list[float]] = collections.defaultdict(list)
        for role, _, seconds in self.starts.values():
            by_role[role] += seconds
        return {
            role: {
                "median_s": round(statistics.median(xs), 2),
                "max_s": round(max(xs), 2),
                "total_s": round(sum(xs), 1),
            }
            for role, xs in sorted(by_role.items())
            if xs
        }

    def close(self) -> None:
        self._restore()
