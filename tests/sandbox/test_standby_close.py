"""A standby run worker promoted after a crash is closed with the pool: it serves from then on, outside the
pool's original worker list (a CPU soak in CI found one outliving its client)."""

from __future__ import annotations

import time

import psutil

from kernels_env.runtime.pool import WorkerPool
from kernels_env.runtime.supervisor import Worker


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_promoted_standby_does_not_outlive_the_pool(tmp_path):
    def worker(name: str) -> Worker:
        return Worker("run", "cpu", {}, tmp_path, name, 4 * 2**30, 240.0)

    first, standby = worker("run0"), worker("run0-standby")
    pool = WorkerPool([first], standbys=[standby])
    pool.start()
    try:
        deadline = time.monotonic() + 240
        while not (standby.alive and standby.hello is not None) and time.monotonic() < deadline:
            time.sleep(0.2)  # the standby starts in the background
        assert standby.alive and standby.hello is not None
        with pool.acquire() as w:
            assert w is first
            w.kill()  # its candidate crashed it: released dead, the standby takes its place
        with pool.acquire() as w:
            assert w is standby  # promoted: now the pool's serving worker
            promoted = w.proc.pid
    finally:
        pool.close()
    assert not _alive(promoted)
    assert not (first.proc and _alive(first.proc.pid))  # the crashed one's restart (the new standby) too
