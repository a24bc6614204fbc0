"""Background work that could escape the timer (catalogue #7): threads the candidate started or runs code in.

Three views, because each misses something: Python's thread table (``threading``), the stacks of every
interpreter thread (``sys._current_frames``: catches ``_thread.start_new_thread`` and idle workers parked in
candidate code) and the OS task list (``/proc/self/task``: catches threads started from C, e.g. through
ctypes). Runtimes name their own helper threads (``cuda-EvtHandlr``...); unnamed new OS threads (same name as
the main thread) that outlive the forward are the candidate's.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

import torch

from . import _checks
from ._frames import CANDIDATE, REFERENCE, FrameClassifier, describe


def _os_threads() -> dict[int, str]:
    out = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    out[int(tid)] = f.read().strip()
            except OSError:
                continue
    except OSError:  # not Linux: the Python-level views still work
        pass
    return out


def warm_up_intra_op_pool() -> None:
    """Start ATen's intra-op (OpenMP) pool now, before the judge's thread baseline: its threads start lazily
    at the first parallel CPU op (unnamed, like the main thread), which would otherwise be a correct
    candidate's (CPU tensors built by its C++, a batch the shape family grew) and be blamed on it as
    threads it left running (issue 31). An elementwise op and a reduction, each above ATen's grain size."""
    if torch.get_num_threads() > 1:
        x = torch.ones(1 << 20)
        x.add_(1)
        x.sum()


@dataclass
class ThreadSnapshot:
    python: set[int]
    os_threads: dict[int, str]

    @classmethod
    def capture(cls) -> ThreadSnapshot:
        return cls({t.ident for t in threading.enumerate() if t.ident is not None}, _os_threads())


def _target_code_file(thread: threading.Thread) -> str | None:
    target = getattr(thread, "_target", None)
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    return code.co_filename if code is not None else None


def thread_violations(
    before: ThreadSnapshot, classifier: FrameClassifier, os_before: ThreadSnapshot | None = None
) -> list[_checks.Violation]:
    """Threads alive now that belong to the candidate (started after ``before``, or running its code).

    ``os_before`` is the baseline for the OS-level view (threads started from C): the snapshot taken when the
    forward started, so runtime helper threads created earlier are not blamed. None skips that view (use it
    for the warm-up call, where runtimes start their helper threads lazily)."""
    found: list[_checks.Violation] = []
    me = threading.get_ident()
    seen: set[int] = set()
    others = {i: f for i, f in sys._current_frames().items() if i != me}
    # Never bind this thread's own frame to a local: frame -> locals -> frame is a reference cycle that keeps
    # every caller's locals (a trial's input and output tensors) alive until the next garbage collection.
    for ident, frame in others.items():
        culprit = classifier.find(frame, (CANDIDATE, REFERENCE))
        if culprit is not None:
            seen.add(ident)
            found.append(
                _checks.Violation(
                    _checks.BACKGROUND_THREAD,
                    "a background thread is running candidate code after forward returned",
                    {"frame": describe(culprit)},
                )
            )
    native_ids = set()
    for t in threading.enumerate():
        if t.native_id is not None:
            native_ids.add(t.native_id)
        if t.ident in before.python or t.ident in seen or t.ident == me or not t.is_alive():
            continue
        target_file = _target_code_file(t)
        if target_file is not None and classifier.classify(target_file) in (CANDIDATE, REFERENCE):
            found.append(
                _checks.Violation(
                    _checks.BACKGROUND_THREAD,
                    f"thread {t.name!r} started by the candidate is still alive",
                    {"thread": t.name, "target": target_file},
                )
            )
    if os_before is None:
        return found
    now = _os_threads()
    main_name = now.get(os.getpid(), os_before.os_threads.get(os.getpid()))
    fresh = [
        tid
        for tid, name in now.items()
        if tid not in os_before.os_threads and tid not in native_ids and name == main_name
    ]
    # not shared with _cuda's launch errors: alike only in building one Violation each
    if fresh and not found:
        found.append(
            _checks.Violation(
                _checks.BACKGROUND_THREAD,
                f"{len(fresh)} new unnamed OS thread(s) outlive the forward",
                {"tids": fresh, "name": main_name},
            )
        )
    return found
