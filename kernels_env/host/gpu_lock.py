"""A cross-process reader-writer lock per GPU, on ``flock(2)`` files: timing-exclusive GPU sharing.

With ``SandboxConfig.run_workers_per_gpu`` N > 1 the run workers of one GPU overlap their non-timing work
(imports, correctness trials and families, inductor code generation, Python overhead), but every timed
measurement must have the GPU to itself. Each run worker holds this lock **shared** while it may have GPU work
in flight (a whole request, from the first candidate or reference code until the device is synchronised at
its end) and **exclusive** while it times (``judge.timing.gpu_share`` says where). Only with N > 1 (on
CUDA, or on a CPU through ``CPU_HOOK`` for tests) is a lock made at all; with N = 1 nothing here runs.

Files, in the fleet's private temp directory, one pair per physical GPU (keyed by its ``CUDA_VISIBLE_DEVICES``
entry), named by ``ENV`` in each run worker's environment: ``<prefix>.lock`` (the lock itself) and
``<prefix>.gate`` (a turnstile). Every acquisition first takes the gate exclusively, then the lock in the
wanted mode, then drops the gate. A writer keeps the gate while it waits for the readers to drain, so readers
that arrive after it wait behind it: **writer preference**, timing is never starved by a stream of readers.
A reader that waits for the lock (a writer holds it) keeps the gate too, so readers and writers alternate.

Failure modes (docs/sandbox.md, "Several run workers per GPU"):

- **A dead process holds nothing.** flock locks belong to the open file description and go with its last
  descriptor, so a crashed, killed or timed-out worker never leaves the GPU locked. The descriptors are
  close-on-exec (a tool or compiler it execs does not inherit them); a child it *forks* does share them, and
  the supervisor kills a worker's whole process tree with it (``host.processes.kill_tree``).
- **Deadlock freedom.** A process never waits for the lock while it holds it (``_take`` refuses: a shared
  holder that wants to time releases first, then queues for exclusive, then queues for shared again), and a
  waiter holds at most the gate, which only a process about to acquire holds. So every wait ends when the
  current holders finish their work or are killed at their own time limit.
- **A hung holder.** A candidate that hangs while its worker holds the lock shared (a spinning kernel) blocks
  the other workers' timing until its request's limit kills it. That is intended: timing next to a spinning
  kernel would be wrong. Waiters report their waits (``on_wait``) so that the supervisor does not count them
  against their own request's limit (``runtime.supervisor``), at most once more that limit.
- **Tampering.** Candidate code shares the worker's process. Closing or replacing the lock's descriptors
  would drop the lock without the worker knowing; ``lost`` notices it at the next transition (descriptor
  identity checked with ``fstat``), ``unheld`` a release behind the handle's back when nobody else holds
  the lock, and the judge rejects the candidate (``judge_tampered``) and retires the worker. Its work may
  have overlapped a neighbour's measurement by then, and a release undone before the check is not seen: a
  lock held by the supervisor, outside the candidate's process, would close that. The descriptors sit at
  random high numbers, out of the way of code that closes "its" low ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ENV = "KERNELS_ENV_GPU_LOCK"  # a run worker's lock: the path prefix of its GPU's .gate/.lock files
# Tests only: make the lock on a CPU too (CPU mode has no timing to protect, but the same code paths run).
CPU_HOOK = "KERNELS_ENV_GPU_LOCK_ON_CPU"

NONE, SHARED, EXCLUSIVE = "none", "shared", "exclusive"
_POLL_S = (0.002, 0.05)  # a bounded wait polls, backing off from the first to the second


def enabled(run_workers_per_gpu: int, exclusive_timing: bool, device: str) -> bool:
    """Whether run workers take the lock: several share a GPU and timing must be exclusive. On a CPU only
    with ``CPU_HOOK=1`` (tests: the same code paths, no GPU)."""
    if run_workers_per_gpu <= 1 or not exclusive_timing:
        return False
    return device == "cuda" or os.environ.get(CPU_HOOK) == "1"


def lock_prefix(directory: Path, gpu: str) -> str:
    """The lock files' prefix for a GPU named by its ``CUDA_VISIBLE_DEVICES`` entry (an index or a UUID)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in gpu) or "cpu"
    return str(directory / f"gpu-{safe}")


class GpuLockLost(RuntimeError):
    """The lock's descriptors were closed or replaced by someone else in this process."""


class GpuLock:
    """One process's handle on one GPU's lock. Not thread-safe: the run worker's request thread uses it.

    ``on_wait(True)`` is called when an acquisition has to wait, ``on_wait(False)`` when it got the lock.
    ``waited_s`` and ``exclusive_s`` accumulate the seconds spent acquiring and holding exclusive."""

    def __init__(self, prefix: str, on_wait: Callable[[bool], None] | None = None):
        self.prefix = prefix
        self.on_wait = on_wait
        self.state = NONE
        self.waited_s = 0.0
        self.exclusive_s = 0.0
        self._exclusive_since = 0.0
        self._gate = _open_high(prefix + ".gate")
        self._lock = _open_high(prefix + ".lock")
        self._ids = {fd: _identity(fd) for fd in (self._gate, self._lock)}

    # -- acquisition -------------------------------------------------------------------------------------
    def acquire(self, mode: str, timeout_s: float | None = None) -> bool:
        """Take the lock in ``mode`` (SHARED or EXCLUSIVE) from holding nothing; False if ``timeout_s``
        passed first (then nothing is held)."""
        if self.state != NONE:  # waiting while holding is how deadlocks start: never
            raise RuntimeError(f"acquire({mode}) while holding the GPU lock {self.state}")
        if mode not in (SHARED, EXCLUSIVE):
            raise ValueError(f"unknown lock mode {mode!r}")
        self.check()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        started, waiting = time.monotonic(), [False]
        try:
            if not self._flock(self._gate, fcntl.LOCK_EX, deadline, waiting):
                return False
            try:
                op = fcntl.LOCK_EX if mode == EXCLUSIVE else fcntl.LOCK_SH
                if not self._flock(self._lock, op, deadline, waiting):
                    return False
            finally:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
            self.state = mode
            if mode == EXCLUSIVE:
                self._exclusive_since = time.monotonic()
            return True
        finally:
            if waiting[0]:
                self.waited_s += time.monotonic() - started
                if self.on_wait is not None:
                    self.on_wait(False)

    def release(self) -> None:
        """Drop whatever is held (nothing held: nothing to do)."""
        if self.state == NONE:
            return
        if self.state == EXCLUSIVE:
            self.exclusive_s += time.monotonic() - self._exclusive_since
        self.state = NONE
        self.check()
        fcntl.flock(self._lock, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def held(self, mode: str, timeout_s: float | None = None) -> Iterator[bool]:
        """``mode`` from holding nothing, released at exit; yields whether it was taken (``timeout_s``)."""
        got = self.acquire(mode, timeout_s)
        try:
            yield got
        finally:
            if got:
                self.release()

    def _flock(self, fd: int, op: int, deadline: float | None, waiting: list[bool]) -> bool:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if not waiting[0]:
            waiting[0] = True
            if self.on_wait is not None:
                self.on_wait(True)
        if deadline is None:
            fcntl.flock(fd, op)  # blocks; EINTR is retried by Python (PEP 475)
            return True
        pause = _POLL_S[0]
        while time.monotonic() < deadline:
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, _POLL_S[1])
            try:
                fcntl.flock(fd, op | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                continue
        return False

    # -- integrity ---------------------------------------------------------------------------------------
    def lost(self) -> str | None:
        """Why the lock can no longer be trusted (its descriptors closed or replaced), or None."""
        for fd, ident in self._ids.items():
            try:
                now = _identity(fd)
            except OSError as exc:
                return f"descriptor {fd} of the GPU lock was closed ({exc.strerror})"
            if now != ident:
                return f"descriptor {fd} of the GPU lock now refers to another file"
        return None

    def unheld(self) -> str | None:
        """Why this handle does not hold the lock its state says it holds (released behind its back, e.g. by
        a direct ``flock`` on its descriptor), or None. A probe on a descriptor of its own asks for exclusive
        without waiting: granted means nobody holds the lock, this handle included. (Refused proves nothing
        when a neighbour holds it too: the check catches the release only when it is alone.)"""
        if self.state == NONE:
            return None
        probe = os.open(self.prefix + ".lock", os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        finally:
            os.close(probe)  # and with it the probe's lock, if it got one
        return f"the GPU lock this worker held {self.state} was released behind its back"

    def check(self) -> None:
        problem = self.lost()
        if problem is not None:
            self.state = NONE
            raise GpuLockLost(problem)

    def close(self) -> None:
        for fd in (self._gate, self._lock):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.state = NONE


def _open_high(path: str) -> int:
    """The file opened read-write (created if need be), close-on-exec, at a random high descriptor."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256 + secrets.randbelow(512))
    except OSError:  # a descriptor limit below that: a plain one serves as well
        return os.dup(fd)
    finally:
        os.close(fd)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino
