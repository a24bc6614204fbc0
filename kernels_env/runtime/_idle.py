"""What the local and the Ray worker pools share: the idle queue one worker per request is handed out of,
with the pool's failure and closed state (``pool.WorkerPool``, ``ray_pool.RayWorkerPool``)."""

from __future__ import annotations

import queue
import threading
from typing import Generic, TypeVar

from .errors import SandboxError

W = TypeVar("W")


class IdleWorkers(Generic[W]):
    def __init__(self) -> None:
        self._idle: queue.Queue[W] = queue.Queue()
        self._lock = threading.Lock()
        self._error: str | None = None  # the pool cannot serve any more (a worker could not be restarted)
        self._closed = False

    def _usable(self, worker: W) -> bool:
        """Whether an idle worker may be handed out (else it is replaced)."""
        return True

    def _replace(self, worker: W) -> None:
        raise NotImplementedError

    def _next_idle(self) -> W:
        """Wait for an idle usable worker; raises ``SandboxError`` once the pool has failed or is closed."""
        while True:
            if self._error:
                raise SandboxError(self._error)
            if self._closed:
                raise SandboxError("the sandbox client is closed")
            try:
                worker = self._idle.get(timeout=1.0)
            except queue.Empty:
                continue
            if self._usable(worker):
                return worker
            self._replace(worker)
