"""A request whose worker another thread kills ends at once: the pool closing (``Worker.close``) is a
``SandboxError`` (no verdict on the candidate), any other kill a crash. Before, the request waited on the
killed worker's closed pipe until its own deadline (up to the compile timeout + 60 s: a budget-cut
load_inline_throughput run hung at exit)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from kernels_env.runtime.errors import SandboxError, WorkerFailure
from kernels_env.runtime.supervisor import Worker


def _waiting(tmp_path) -> Worker:
    """A Worker whose process never answers (a long build, seen from the supervisor)."""
    worker = Worker("compile", "cpu", {}, tmp_path, "compile0", 2**30, 60.0)
    worker.proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    return worker


def _read_while(worker: Worker, stop) -> tuple[BaseException | None, float]:
    outcome: list = []

    def read():
        t0 = time.monotonic()
        try:
            worker._read(time.monotonic() + 100, request_id="r1", timeout_s=100)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append((exc, time.monotonic() - t0))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    time.sleep(0.5)  # the reader is polling the pipe
    stop()
    thread.join(timeout=20)
    assert not thread.is_alive(), "the request kept waiting on a killed worker"
    return outcome[0]


def test_the_pool_closing_ends_a_request_in_flight_with_a_sandbox_error(tmp_path):
    worker = _waiting(tmp_path)
    exc, waited = _read_while(worker, lambda: worker.close(grace_s=0.0))
    assert isinstance(exc, SandboxError) and "sandbox closed" in str(exc) and waited < 10


@pytest.mark.parametrize("start_killed", [False, True])
def test_a_worker_killed_otherwise_is_a_crash_not_a_wait(tmp_path, start_killed):
    worker = _waiting(tmp_path)
    if start_killed:  # killed between the request's write and its read
        worker.kill()
        with pytest.raises(WorkerFailure) as info:
            worker._read(time.monotonic() + 100, request_id="r1", timeout_s=100)
        assert info.value.kind == "crash"
        return
    exc, waited = _read_while(worker, worker.kill)
    assert isinstance(exc, WorkerFailure) and exc.kind == "crash" and waited < 10
