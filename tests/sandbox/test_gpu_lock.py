"""The GPU lock (``kernels_env.host.gpu_lock``) across real processes: readers overlap, a writer excludes
readers and writers, a waiting writer goes before readers that come after it, a killed holder leaves nothing
locked; and what one process may not do with it (wait while holding, keep trusting closed descriptors)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernels_env.host import gpu_lock
from kernels_env.host.gpu_lock import EXCLUSIVE, SHARED, GpuLock, GpuLockLost

ROOT = Path(__file__).resolve().parents[2]

# A holder in a process of its own, driven line by line on stdin: "shared", "exclusive", "release"; it answers
# "<command> <monotonic seconds>" once done: for an acquisition the time it got the lock, for a release the
# time just before it let go (CLOCK_MONOTONIC is one clock for every process of the machine).
HOLDER = """
import sys, time
from kernels_env.host.gpu_lock import GpuLock
lock = GpuLock(sys.argv[1])
print("ready", time.monotonic(), flush=True)
for line in sys.stdin:
    cmd = line.strip()
    at = time.monotonic()
    if cmd == "release":
        lock.release()
    else:
        lock.acquire(cmd)
        at = time.monotonic()
    print(cmd, at, flush=True)
"""


class Holder:
    def __init__(self, prefix: str):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert self.answer()[0] == "ready"

    def send(self, cmd: str) -> None:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def answer(self) -> tuple[str, float]:
        word, at = self.proc.stdout.readline().split()
        return word, float(at)

    def do(self, cmd: str) -> float:
        self.send(cmd)
        word, at = self.answer()
        assert word == cmd
        return at

    def answered_within(self, seconds: float) -> bool:
        """Whether the holder answered its last command within ``seconds`` (it is blocked otherwise)."""
        import selectors

        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            return bool(sel.select(timeout=seconds))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def prefix(tmp_path) -> str:
    return gpu_lock.lock_prefix(tmp_path, "GPU-1a2b/3")


@pytest.fixture
def holders(prefix):
    made: list[Holder] = []

    def make() -> Holder:
        made.append(Holder(prefix))
        return made[-1]

    yield make
    for h in made:
        h.close()


def test_readers_overlap(prefix, holders):
    a, b = holders(), holders()
    a.do(SHARED)
    b.do(SHARED)  # answered while a still holds it: shared is shared
    mine = GpuLock(prefix)
    assert mine.acquire(SHARED, timeout_s=1.0)  # and a third reader too
    mine.release()
    assert not mine.acquire(EXCLUSIVE, timeout_s=0.2)  # but no writer
    a.do("release")
    b.do("release")
    assert mine.acquire(EXCLUSIVE, timeout_s=5.0)


def test_a_writer_excludes_readers_and_writers(prefix, holders):
    writer = holders()
    writer.do(EXCLUSIVE)
    mine = GpuLock(prefix)
    assert not mine.acquire(SHARED, timeout_s=0.3) and mine.state == "none"
    assert not mine.acquire(EXCLUSIVE, timeout_s=0.3) and mine.state == "none"
    other = holders()
    other.send(SHARED)
    assert not other.answered_within(0.5)  # blocked behind the writer
    released = writer.do("release")
    word, at = other.answer()
    assert word == SHARED and at >= released


def test_a_waiting_writer_goes_before_readers_that_come_after_it(prefix, holders):
    """Writer preference: with a reader in, a writer queues; a reader arriving after it waits for it even
    though the lock is only held shared (else a stream of readers would starve timing)."""
    first, writer, late = holders(), holders(), holders()
    first.do(SHARED)
    writer.send(EXCLUSIVE)
    assert not writer.answered_within(0.5)  # waits for the reader to drain
    late.send(SHARED)
    assert not late.answered_within(0.5)  # a later reader waits behind the writer
    first.do("release")
    word, granted = writer.answer()
    assert word == EXCLUSIVE
    assert not late.answered_within(0.3)  # still behind the writer while it holds
    released = writer.do("release")
    word, late_at = late.answer()
    assert word == SHARED and late_at >= released > granted


def test_a_killed_holder_leaves_nothing_locked(prefix, holders):
    for mode in (EXCLUSIVE, SHARED):
        victim = holders()
        victim.do(mode)
        mine = GpuLock(prefix)
        assert not mine.acquire(EXCLUSIVE, timeout_s=0.2)
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(timeout=30)
        assert mine.acquire(EXCLUSIVE, timeout_s=5.0)  # the kernel dropped its lock with its descriptors
        mine.release()
        mine.close()


def test_a_holder_killed_while_waiting_as_writer_frees_the_gate(prefix, holders):
    """A writer waiting for readers holds the gate; killed there, it must not keep later readers out."""
    reader, writer = holders(), holders()
    reader.do(SHARED)
    writer.send(EXCLUSIVE)
    assert not writer.answered_within(0.3)
    mine = GpuLock(prefix)
    assert not mine.acquire(SHARED, timeout_s=0.2)  # behind the waiting writer
    os.kill(writer.proc.pid, signal.SIGKILL)
    writer.proc.wait(timeout=30)
    assert mine.acquire(SHARED, timeout_s=5.0)


def test_waits_are_announced_and_counted(prefix, holders):
    calls: list[bool] = []
    mine = GpuLock(prefix, on_wait=calls.append)
    assert mine.acquire(SHARED)  # free: no wait, nothing announced
    mine.release()
    assert calls == [] and mine.waited_s == 0.0
    writer = holders()
    writer.do(EXCLUSIVE)
    assert not mine.acquire(SHARED, timeout_s=0.3)  # a wait that ends without the lock is a wait too
    assert calls == [True, False] and 0.3 <= mine.waited_s < 5
    writer.do("release")
    assert mine.acquire(EXCLUSIVE, timeout_s=5.0)
    time.sleep(0.05)
    mine.release()
    assert 0.05 <= mine.exclusive_s < 5


def test_no_waiting_while_holding(prefix):
    mine = GpuLock(prefix)
    mine.acquire(SHARED)
    with pytest.raises(RuntimeError, match="while holding"):
        mine.acquire(EXCLUSIVE)
    mine.release()
    with mine.held(EXCLUSIVE) as got:
        assert got and mine.state == EXCLUSIVE
    assert mine.state == "none"


def test_closed_or_replaced_descriptors_are_noticed(prefix, tmp_path):
    mine = GpuLock(prefix)
    assert mine.lost() is None
    mine.acquire(SHARED)
    os.close(mine._lock)  # what a candidate sharing the process could do
    assert "closed" in mine.lost()
    with pytest.raises(GpuLockLost):
        mine.release()
    again = GpuLock(prefix)
    other = os.open(tmp_path / "elsewhere", os.O_RDWR | os.O_CREAT)
    os.dup2(other, again._gate)
    assert "another file" in again.lost()
    with pytest.raises(GpuLockLost):
        again.acquire(SHARED)


def test_a_release_behind_the_handles_back_is_noticed_when_alone(prefix, holders):
    import fcntl

    mine = GpuLock(prefix)
    mine.acquire(SHARED)
    assert mine.unheld() is None
    fcntl.flock(mine._lock, fcntl.LOCK_UN)  # the state still says shared
    assert "released behind its back" in mine.unheld()
    neighbour = holders()
    neighbour.do(SHARED)
    assert mine.unheld() is None  # a neighbour's hold hides it: the probe cannot tell (documented)
    assert GpuLock(prefix).unheld() is None  # holding nothing: nothing to check


def test_descriptors_are_close_on_exec_and_out_of_the_way(prefix):
    mine = GpuLock(prefix)
    for fd in (mine._gate, mine._lock):
        assert not os.get_inheritable(fd) and fd >= 256


def test_only_several_workers_with_exclusive_timing_take_it(monkeypatch, tmp_path):
    monkeypatch.delenv(gpu_lock.CPU_HOOK, raising=False)
    assert not gpu_lock.enabled(1, True, "cuda")  # one worker per GPU: nothing changes
    assert not gpu_lock.enabled(3, False, "cuda")  # switched off: the disturbed (noted) timings of before
    assert gpu_lock.enabled(2, True, "cuda")
    assert not gpu_lock.enabled(2, True, "cpu")  # CPU mode times nothing comparable ...
    monkeypatch.setenv(gpu_lock.CPU_HOOK, "1")
    assert gpu_lock.enabled(2, True, "cpu")  # ... but tests run the same code paths there
    assert gpu_lock.lock_prefix(tmp_path, "GPU-1a2b/3").endswith("gpu-GPU-1a2b_3")
