"""The local pool of worker processes: one idle worker per request, a ready standby in place of a dead or
recycled one, restarts in the background, and a close that leaves no worker process behind."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from ._idle import IdleWorkers
from ._parallel import side_by_side
from .errors import SandboxError
from .supervisor import Worker


class WorkerPool(IdleWorkers[Worker]):
    """Hands out one idle worker per request. A dead or recycled worker is replaced at once by its ready
    standby (a started twin with the same environment, e.g. the same GPU) when it has one, and restarted in
    the background to become the next standby; without a standby the request after a crash waits for the
    restart."""

    def __init__(self, workers: list[Worker], max_requests: int = 0, standbys: list[Worker] | None = None):
        super().__init__()
        self.workers = list(workers)
        self.members = [*self.workers, *(standbys or [])]  # every Worker object this pool runs (diagnostics)
        self.max_requests = max_requests
        self._standby: dict[int, Worker | None] = dict(enumerate(standbys or []))
        self._slot = {id(w): i for i, w in enumerate(self.workers)}
        self._slot.update({id(w): i for i, w in self._standby.items() if w is not None})
        self._starting: set[Worker] = set()
        self._restarts: list[threading.Thread] = []  # close() waits for them: no worker outlives its pool

    def start(self) -> None:
        """Start the workers (blocking); standbys start afterwards in the background."""
        errors: list[str] = []

        def boot(w: Worker) -> None:
            try:
                w.start()
                self._idle.put(w)
            except SandboxError as exc:
                errors.append(str(exc))

        side_by_side(boot, self.workers)
        if errors:
            self.close()
            raise SandboxError(errors[0])
        for slot, standby in list(self._standby.items()):
            if standby is not None:
                self._standby[slot] = None
                self._spawn_restart(standby, True)

    @contextlib.contextmanager
    def acquire(self) -> Iterator[Worker]:
        worker = self._next_idle()
        try:
            yield worker
        finally:
            recycle = self.max_requests and worker.requests >= self.max_requests
            if worker.alive and not recycle:
                self._idle.put(worker)
            elif not self._closed:
                self._replace(worker)

    def _usable(self, worker: Worker) -> bool:
        # A leftover writer of the previous candidate, or a worker that died while idle (handed out, its
        # "not running" failure became the next candidate's runtime_error): replaced, never handed out.
        return worker.alive and not worker.stray_output()

    def _replace(self, worker: Worker) -> None:
        worker.kill()
        slot = self._slot[id(worker)]
        with self._lock:
            standby = self._standby.get(slot)
            ready = standby is not None and standby.alive and standby.hello is not None
            if ready:
                self._standby[slot] = None
        if ready:
            self._idle.put(standby)
        self._spawn_restart(worker, ready)

    def _spawn_restart(self, worker: Worker, as_standby: bool) -> None:
        thread = threading.Thread(target=self._restart, args=(worker, as_standby), daemon=True)
        with self._lock:
            self._restarts = [t for t in self._restarts if t.is_alive()] + [thread]
        thread.start()

    def _restart(self, worker: Worker, as_standby: bool) -> None:
        last = ""
        for attempt in range(3):
            with self._lock:
                if self._closed:
                    return
                self._starting.add(worker)  # close() kills it too: no worker outlives its pool
            try:
                worker.start()
                with self._lock:
                    closed = self._closed
                    if not closed and as_standby:
                        self._standby[self._slot[id(worker)]] = worker
                    elif not closed:
                        self._idle.put(worker)
                if closed:
                    worker.close()
                return
            except SandboxError as exc:
                last = str(exc)
                time.sleep(1 + attempt)
            finally:
                with self._lock:
                    self._starting.discard(worker)
        if not as_standby:
            self._error = f"{worker.name} worker could not be restarted: {last}"

    def environments(self) -> list[dict[str, Any]]:
        return [w.hello.environment for w in self.workers if w.hello is not None]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            # Every Worker object of the pool: a standby promoted after a crash serves from then on but is in
            # neither self.workers nor _standby (a CPU soak in CI found one outliving the client).
            workers = list(self.members)
            workers += [w for w in self._starting if w not in workers]  # restarts still importing torch
        for w in workers:  # all at once: each may take a moment to exit
            w.request_shutdown()
        deadline = time.monotonic() + 10.0
        for w in workers:
            w.close(grace_s=max(0.0, deadline - time.monotonic()))
        # A restart may still be spawning its process (it had none to kill above): kill what it starts until
        # it gives up, so that no worker outlives the pool (a soak run found one that did).
        with self._lock:
            restarts = list(self._restarts)
        for thread in restarts:
            while thread.is_alive() and time.monotonic() < deadline + 20.0:
                with self._lock:
                    starting = list(self._starting)
                for w in starting:
                    w.kill()
                thread.join(timeout=0.2)
