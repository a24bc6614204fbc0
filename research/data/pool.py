"""A process pool with per-task timeouts: a task that hangs or kills its process (segfault, OOM kill) only
costs that worker, which is replaced; the task gets a structured ``timeout``/``worker_crash`` result.

``concurrent.futures`` cannot do this (a hung task cannot be cancelled, a dead worker breaks the pool).
Workers are fresh interpreters (never forked: torch and fork do not mix) that import torch once, so a check
costs milliseconds, not the seconds of a fresh interpreter; they are recycled every ``max_tasks`` tasks to
bound memory and compiler caches.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import threading
import time
from collections import deque
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any


def _worker_main(read_fd: int, write_fd: int, target: str, preload: str = "") -> None:
    """Entry point of a worker process (``python -m research.data.pool R W module:function``)."""
    conn_in, conn_out = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    parent = os.getppid()

    def orphan_watch() -> None:  # a worker never outlives its pool, even in the middle of a long task
        while os.getppid() == parent:
            time.sleep(2.0)
        os._exit(3)

    threading.Thread(target=orphan_watch, daemon=True).start()
    module, fn_name = target.split(":")
    fn = getattr(importlib.import_module(module), fn_name)
    for name in filter(None, preload.split(",")):
        importlib.import_module(name)
    conn_out.send((_READY, None))  # task timeouts start after this, never during interpreter start-up
    while True:
        try:
            msg = conn_in.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if msg is None:
            return
        key, payload = msg
        try:
            result = fn(payload)
        except BaseException as exc:  # noqa: BLE001 - a worker never dies of a task's Python error
            result = {"ok": False, "reason": "worker_exception", "detail": repr(exc)[:500]}
        conn_out.send((key, result))


_READY = "__worker_ready__"


class _Worker:
    """A fresh interpreter (not multiprocessing's spawn: that re-imports the caller's ``__main__``, which
    breaks unguarded scripts) speaking pickled messages over two pipes."""

    def __init__(self, target: str, env: dict[str, str], log, preload: str = ""):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        cmd = [
            sys.executable,
            "-m",
            "research.data.pool",
            str(to_child_r),
            str(from_child_w),
            target,
            preload,
        ]
        self.proc = subprocess.Popen(
            cmd,
            pass_fds=(to_child_r, from_child_w),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env={**os.environ, **env, "PYTHONPATH": path},
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.send_conn = Connection(to_child_w, readable=False)
        self.conn = Connection(from_child_r, writable=False)
        self.key: Any = None
        self.ready = False
        self.started = 0.0
        self.done = 0

    def send(self, msg) -> None:
        self.send_conn.send(msg)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self.conn.close()
        self.send_conn.close()


class WorkerPool:
    def __init__(
        self,
        target: str,
        workers: int,
        timeout_s: float,
        max_tasks: int = 250,
        env: dict[str, str] | None = None,
        log_path: str | None = None,
        preload: str = "torch",
    ):
        self.target, self.timeout_s, self.max_tasks = target, timeout_s, max_tasks
        self.env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **(env or {})}
        self.log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed in close()
        self.preload = preload
        self.startup_failures = 0
        self.workers = [_Worker(target, self.env, self.log, preload) for _ in range(max(1, workers))]
        self.queue: deque = deque()
        self.restarts = 0

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def busy(self) -> int:
        return len(self.queue) + sum(w.key is not None for w in self.workers)

    def submit(self, key: Any, payload: dict) -> None:
        self.queue.append((key, payload))
        self._dispatch()

    def _replace(self, i: int) -> None:
        self.workers[i].kill()
        self.workers[i] = _Worker(self.target, self.env, self.log, self.preload)
        self.restarts += 1

    def _dispatch(self) -> None:
        for i, w in enumerate(self.workers):
            if not self.queue:
                return
            if w.key is None and w.done >= self.max_tasks:
                self._replace(i)
                w = self.workers[i]
            if w.key is None and w.ready:
                key, payload = self.queue.popleft()
                w.key, w.started = key, time.monotonic()
                w.send((key, payload))

    def poll(self, timeout: float = 0.5) -> list[tuple[Any, dict]]:
        """Results finished so far (waits up to ``timeout`` for the first one)."""
        out = []
        watched = [w for w in self.workers if w.key is not None or not w.ready]
        ready = wait([w.conn for w in watched], timeout=timeout) if watched else []
        for i, w in enumerate(self.workers):
            if w.conn in ready:
                try:
                    key, result = w.conn.recv()
                except (EOFError, OSError):
                    if w.key is not None:
                        code = None  # the pipe closes a moment before the process can be reaped
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            code = w.proc.wait(timeout=5)
                        detail = f"exit code {code}"
                        out.append((w.key, {"ok": False, "reason": "worker_crash", "detail": detail}))
                    elif not w.ready:
                        self.startup_failures += 1
                        if self.startup_failures >= 3:
                            raise RuntimeError(
                                f"worker processes for {self.target} die during start-up (exit code "
                                f"{w.proc.poll()}); see the worker log for the traceback"
                            ) from None
                    self._replace(i)
                    continue
                if key == _READY:
                    w.ready = True
                else:
                    w.key, w.done = None, w.done + 1
                    out.append((key, result))
            elif w.key is not None and time.monotonic() - w.started > self.timeout_s:
                out.append((w.key, {"ok": False, "reason": "timeout", "detail": f"> {self.timeout_s:.0f} s"}))
                self._replace(i)
        self._dispatch()
        return out

    def close(self) -> None:
        for w in self.workers:
            try:
                if w.key is None and w.proc.poll() is None:
                    w.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for w in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            w.kill()
        if self.log is not subprocess.DEVNULL:
            self.log.close()


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
