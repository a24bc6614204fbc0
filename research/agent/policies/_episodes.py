"""What the two generation threads of the Flax policy (``batcher.GenerationBatcher`` over a sampler,
``engine_driver.EngineDriver`` over an engine) share: the count of episodes they serve and the queue their
episode threads hand turns to, under one condition variable their thread waits on."""

from __future__ import annotations

import threading
from typing import Any


class EpisodeQueue:
    """``register`` / ``unregister`` as episodes start and end; ``reserve(n)`` counts ``n`` episodes before
    their threads register (so a thread waiting for every episode waits for them too) and ``release(n)``
    gives back reservations of episodes that ended before they registered (their workspace could not be
    made). ``_active`` is the count; ``_queue(item)`` adds a turn for the thread and blocks on its future."""

    what = "generation thread"

    def __init__(self):
        self._cv = threading.Condition()
        self._active = self._reserved = 0
        self._closed = False
        self._broken: Exception | None = None  # set by a thread that can serve nothing more

    def _registered(self) -> None:
        """Under the lock: an episode registered."""

    def _ended(self, cache) -> None:
        """Under the lock: an episode ended with ``cache``, its last kept cache."""

    def register(self) -> None:
        with self._cv:
            if self._reserved:
                self._reserved -= 1  # counted by reserve()
            else:
                self._active += 1
            self._registered()

    def reserve(self, n: int) -> None:
        with self._cv:
            self._active += n
            self._reserved += n

    def release(self, n: int = 1) -> None:
        with self._cv:
            n = min(n, self._reserved)
            self._reserved -= n
            self._active -= n
            self._cv.notify_all()

    def unregister(self, cache=None) -> None:
        with self._cv:
            self._active -= 1
            self._ended(cache)
            self._cv.notify_all()

    def _queue(self, queue: list, item) -> Any:
        """Append ``item`` (with a ``future``) to ``queue`` for the thread; its result, once served."""
        with self._cv:
            if self._closed:
                raise RuntimeError(f"the {self.what} is closed")
            if self._broken is not None:
                raise self._broken
            queue.append(item)
            self._cv.notify_all()
        return item.future.result()

    def _close(self, thread: threading.Thread, timeout: float) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        thread.join(timeout=timeout)
