"""Starting and stopping several workers or pools at once: each may take seconds (a worker imports torch)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def side_by_side(fn: Callable[[T], object], items: Iterable[T]) -> None:
    """``fn(item)`` for every item, each in its own daemon thread; returns when all have returned. ``fn``
    handles its own exceptions (an escaping one is lost with its thread)."""
    threads = [threading.Thread(target=fn, args=(item,), daemon=True) for item in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
