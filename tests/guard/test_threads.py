"""Background threads that outlive or escape the forward."""

from __future__ import annotations

import _thread
import threading
import time

from kernels_env.guard import ThreadSnapshot, _checks, thread_violations
from kernels_env.guard._frames import FrameClassifier

CLASSIFIER = FrameClassifier([__file__])


def _spin(stop):
    while not stop.is_set():
        time.sleep(0.01)


def test_thread_running_candidate_code():
    before = ThreadSnapshot.capture()
    stop = threading.Event()
    t = threading.Thread(target=_spin, args=(stop,), daemon=True)
    t.start()
    try:
        found = thread_violations(before, CLASSIFIER)
        assert found and found[0].check == _checks.BACKGROUND_THREAD
    finally:
        stop.set()
        t.join()
    assert thread_violations(before, CLASSIFIER) == []  # finished threads are fine


def test_raw_thread_is_seen_through_its_stack():
    before = ThreadSnapshot.capture()
    stop = threading.Event()
    _thread.start_new_thread(_spin, (stop,))
    time.sleep(0.05)
    try:
        assert [v.check for v in thread_violations(before, CLASSIFIER)][:1] == [_checks.BACKGROUND_THREAD]
    finally:
        stop.set()
        time.sleep(0.05)


def test_threads_started_from_c_are_seen_by_the_os_view():
    import ctypes
    import platform

    libc = ctypes.CDLL(None)
    if platform.machine() not in ("x86_64", "aarch64") or not hasattr(libc, "pthread_create"):
        return
    before = ThreadSnapshot.capture()
    tid = ctypes.c_ulong()
    start = ctypes.cast(libc.sleep, ctypes.c_void_p)  # a pure C thread: sleep(1), no Python frame anywhere
    assert libc.pthread_create(ctypes.byref(tid), None, start, ctypes.c_void_p(1)) == 0
    try:
        time.sleep(0.05)
        assert thread_violations(before, CLASSIFIER, None) == []  # invisible to the Python views...
        found = thread_violations(before, CLASSIFIER, before)  # ... not to the OS task list
        assert found and found[0].check == _checks.BACKGROUND_THREAD
    finally:
        libc.pthread_join(tid, None)


def test_library_threads_parked_in_library_code_are_not_blamed():
    import concurrent.futures

    before = ThreadSnapshot.capture()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(sum, [1, 2]).result()
        assert thread_violations(before, CLASSIFIER) == []
