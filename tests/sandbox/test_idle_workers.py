"""The hand-out loop both worker pools share (``runtime._idle.IdleWorkers``), with stand-in workers: no
process starts."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from kernels_env.runtime.errors import SandboxError
from kernels_env.runtime.pool import WorkerPool
from kernels_env.runtime.ray_pool import RayWorkerPool


class FakeWorker:
    """What ``WorkerPool`` asks of a ``supervisor.Worker``: alive, stray output, requests served, kill."""

    def __init__(self, name: str, alive: bool = True, stray: bool = False):
        self.name, self.alive, self.stray, self.requests, self.hello = name, alive, stray, 0, None
        self.killed = False

    def stray_output(self) -> bool:
        return self.stray

    def kill(self) -> None:
        self.alive, self.killed = False, True

    def start(self) -> None:
        raise SandboxError("stand-in workers do not start")


def _pool(*workers: FakeWorker, standby: FakeWorker | None = None) -> WorkerPool:
    pool = WorkerPool(list(workers), standbys=[standby] if standby else None)
    for w in workers:
        pool._idle.put(w)
    pool._spawn_restart = lambda worker, as_standby: None  # no restart threads: what is handed out is tested
    return pool


def test_a_dead_or_writing_idle_worker_is_replaced_never_handed_out():
    dead, writer, good = FakeWorker("run0", alive=False), FakeWorker("run1", stray=True), FakeWorker("run2")
    pool = _pool(dead, writer, good)
    with pool.acquire() as w:
        assert w is good
    assert writer.killed and dead.killed and not good.killed
    assert pool._idle.get_nowait() is good and pool._idle.empty()


def test_a_dead_worker_is_replaced_by_its_ready_standby():
    dead, standby = FakeWorker("run0", alive=False), FakeWorker("run0-standby")
    standby.hello = object()  # started
    pool = _pool(dead, standby=standby)
    with pool.acquire() as w:
        assert w is standby


def test_a_failed_or_closed_pool_raises_instead_of_waiting():
    pool = _pool(FakeWorker("run0"))
    pool._error = "run0 worker could not be restarted: no memory"
    with pytest.raises(SandboxError, match="could not be restarted"), pool.acquire():
        pass
    pool = _pool(FakeWorker("run0"))
    pool._closed = True
    with pytest.raises(SandboxError, match="client is closed"), pool.acquire():
        pass


def test_a_request_waits_for_a_worker_that_comes_back():
    busy = FakeWorker("run0")
    pool = WorkerPool([busy])
    timer = threading.Timer(0.3, pool._idle.put, args=(busy,))
    timer.start()
    with pool.acquire() as w:
        assert w is busy
    timer.join()


def test_the_ray_pool_hands_out_through_the_same_loop():
    pool = RayWorkerPool(lambda name, generation: None, ["run0"], 10.0)
    actor = SimpleNamespace(name="run0", dead=False)
    pool._idle.put(actor)
    with pool.acquire() as w:
        assert w is actor and pool.in_use() == [actor]
    assert pool.in_use() == [] and pool._idle.get_nowait() is actor
    pool._closed = True
    with pytest.raises(SandboxError, match="client is closed"), pool.acquire():
        pass
