"""The reference's baselines as a client keeps them: measured once per reference and settings on a run
worker (which caches them on disk, ``kernels_env.judge.timing.baselines``), kept in memory, and started
early while the candidate compiles (``prefetch``)."""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
import uuid
from typing import Any

from ..judge.assemble.replies import baselines_reply, lock_durations
from ..judge.build.sources import source_hash
from ..rules.messages import BaselineRequest, Source
from ..runtime.errors import BrokenReference, JudgeFailure, WorkerFailure
from ._sandbox import Sandbox


class Baselines:
    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self._lock = threading.Lock()
        self._locks: dict[tuple, threading.Lock] = {}  # one measurement per key at a time
        self._measured: dict[tuple, dict[str, Any]] = {}
        self._prefetching: set[tuple] = set()
        self._seconds: list[float] = []  # run-worker seconds per measured baseline
        self._gpu_wait: list[float] = []  # of which waiting for the GPU lock (shared GPUs only)

    def clear(self) -> None:
        """Forget the in-memory copies (the next answer comes from the run worker's disk cache)."""
        with self._lock:
            self._measured.clear()

    def seconds(self) -> list[float]:
        with self._lock:
            return list(self._seconds)

    def gpu_wait(self) -> list[float]:
        with self._lock:
            return list(self._gpu_wait)

    @staticmethod
    def key(ref: Source, settings: dict[str, Any]) -> tuple:
        modes = tuple(settings["baselines"])
        return (source_hash(ref), modes, settings["allow_tf32"], settings["mode"], repr(settings["timing"]))

    def prefetch(self, ref: Source, settings: dict[str, Any]) -> None:
        """Start the reference's baselines on the run worker while the candidate compiles on a CPU worker,
        so a cold baseline no longer adds to the verdict's latency (the verdict then finds it in memory).
        Only on a GPU (CPU mode measures eager alone, and a CUDA candidate is not run there). A failure here
        is left to the verdict's own call, which raises it."""
        key = self.key(ref, settings)
        wanted = settings.get("time_candidate") and settings.get("baselines")
        if self.sandbox.device != "cuda" or not wanted:
            return
        with self._lock:
            if key in self._measured or key in self._prefetching:
                return
            self._prefetching.add(key)

        def fetch() -> None:
            try:
                with contextlib.suppress(Exception):  # reported by the verdict's own call
                    self.get(ref, settings)
            finally:
                with self._lock:
                    self._prefetching.discard(key)

        threading.Thread(target=fetch, name="kernels_env-baselines", daemon=True).start()

    def get(self, ref: Source, settings: dict[str, Any]) -> dict[str, Any]:
        """``{"baselines", "comparable"}`` for ``ref`` under ``settings``: from memory, else measured.
        Raises ``BrokenReference`` (the reference failed while timed) or ``JudgeFailure``."""
        key = self.key(ref, settings)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._measured:
                    return self._measured[key]
            out, seconds, waits = self._measure(ref, settings)
            with self._lock:
                self._measured[key] = out
                self._seconds.append(seconds)
                if waits:
                    self._gpu_wait.append(waits["gpu_wait"])
            return out

    def _measure(self, ref: Source, settings: dict[str, Any]) -> tuple[dict[str, Any], float, dict]:
        sandbox = self.sandbox
        request_id = uuid.uuid4().hex[:12]
        workdir = sandbox.fleet.tmp / f"base-{request_id}"
        request = BaselineRequest(
            id=request_id,
            reference=ref,
            modes=list(settings["baselines"]),
            judge=settings,
            cache_dir=str(sandbox.cache_dir),
            workdir=str(workdir),
        )
        try:
            with sandbox.fleet.run.acquire() as worker:
                started = time.perf_counter()  # the worker's time, not the wait for one
                reply = worker.call(request, sandbox.config.baseline_timeout_s)
        except WorkerFailure as exc:  # only the reference ran: a hang or crash while timing it is its own
            if exc.kind in ("protocol", "forgery"):
                raise JudgeFailure(f"baselines of {ref.name}: {exc.detail}") from None
            what = f"reference {ref.name}: {exc.detail} while its baselines were timed"
            raise BrokenReference(what) from None
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        out = baselines_reply(reply.payload, ref.name)
        if isinstance(out, tuple):
            whose, error = out
            raise (BrokenReference if whose == "reference" else JudgeFailure)(error)
        waits: dict[str, float] = {}
        lock_durations(reply.payload.get("gpu_lock_s"), waits)
        return out, time.perf_counter() - started, waits
