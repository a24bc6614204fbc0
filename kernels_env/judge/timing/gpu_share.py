"""The run worker's side of timing-exclusive GPU sharing (``kernels_env.host.gpu_lock``: the lock, its files
and its failure modes).

When the fleet gives a run worker a GPU lock (``gpu_lock.ENV``: several run workers on its GPU and
``SandboxConfig.exclusive_timing``), ``install`` opens it at the worker's start and then:

- ``request``: the worker holds it **shared** for each request's GPU work, from before any reference or
  candidate code runs until the device is synchronised at the end (a candidate's asynchronous work on any of
  its streams, CUDA graph replays included, is finished before another worker may time). Profiling and
  sanitizing requests hold it **exclusive** throughout: Nsight Compute and compute-sanitizer measure or
  instrument the GPU from processes of their own.
- ``exclusive``: around every timed measurement (``timing.time_callable``, the one timer of candidates and
  baselines, after its warm-up calls) the worker synchronises the device, releases shared, takes exclusive,
  measures, synchronises, releases exclusive and takes shared again. Never waiting while holding is what makes
  it deadlock-free (``gpu_lock``). Nested entries (inductor's autotuning benchmarks, below, inside a timed
  call) keep the exclusive lock they are in.
- Inductor's own GPU benchmarks (autotuning the compile baselines' Triton kernels on their first call) take
  it exclusive too: they pick the configuration the baseline is then timed with, and a neighbour's work
  would make a slower one look best. Through ``torch._inductor.runtime.benchmarking``'s
  ``set_gpu_benchmark_lock_context`` where torch has it (2.13), else by wrapping the ``benchmark_gpu`` of
  its ``benchmarker`` object (older torch, e.g. 2.11 on the GPU image: what its autotuners call). Inductor
  benchmarking through anything else (a profiler-based path) stays under the shared lock.
- The copy bandwidth the worker measures at its start (the ``below_roofline`` floor) is measured exclusive,
  waiting at most ``START_WAIT_S``; when it had to go ahead without, the floor allows for sharing as before.

Each request reports its seconds waiting for the lock and holding it exclusive (``times``; verdicts
``durations_s.gpu_wait`` / ``gpu_exclusive``). Without a lock (one run worker per GPU, or
``exclusive_timing`` off) every function here does nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from ...host import gpu_lock
from ...host.gpu_lock import EXCLUSIVE, SHARED, GpuLock

_synchronize = torch.cuda.synchronize  # captured before any candidate code, as timing.py does
START_WAIT_S = 30.0  # the start-up bandwidth probe waits this long for the GPU to itself, then goes ahead

LOCK: GpuLock | None = None
INDUCTOR: str | None = None  # how inductor's benchmarks take the lock: "hook", "wrapped" or None (install)


@dataclass
class LockTimes:
    """One request's seconds waiting for the GPU lock and holding it exclusive."""

    wait: float = 0.0
    exclusive: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return {"wait": round(self.wait, 4), "exclusive": round(self.exclusive, 4)}


def install(device: torch.device, on_wait: Callable[[bool], None] | None = None) -> GpuLock | None:
    """Open this worker's lock when the fleet gave it one (``gpu_lock.ENV``); None otherwise."""
    global LOCK, INDUCTOR
    prefix = os.environ.get(gpu_lock.ENV)
    if not prefix:
        return None
    LOCK = GpuLock(prefix, on_wait)
    INDUCTOR = _hook_inductor_benchmarks(device)
    return LOCK


def active() -> bool:
    return LOCK is not None


def require(timing_lock: bool) -> None:
    """The request's settings and this worker agree on the lock: a timing said to be exclusive must be."""
    if timing_lock != active():
        raise RuntimeError(
            f"the judge settings say timing_lock={timing_lock} but this run worker "
            f"{'has' if active() else 'has no'} GPU lock (fleet and client disagree)"
        )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        _synchronize(device)


@contextlib.contextmanager
def request(device: torch.device, exclusive: bool = False) -> Iterator[LockTimes]:
    """Hold the lock for one request's GPU work (shared, or ``exclusive`` throughout); yields its times,
    filled in at exit. Everything is released at exit, however the request ended."""
    times = LockTimes()
    if LOCK is None:
        yield times
        return
    wait0, exclusive0 = LOCK.waited_s, LOCK.exclusive_s
    try:
        LOCK.acquire(EXCLUSIVE if exclusive else SHARED)
        yield times
    finally:
        with contextlib.suppress(Exception):  # a broken device has no work left in flight
            _sync(device)
        with contextlib.suppress(gpu_lock.GpuLockLost):  # reported by ``lost`` to the request's verdict
            LOCK.release()
        times.wait = LOCK.waited_s - wait0
        times.exclusive = LOCK.exclusive_s - exclusive0


@contextlib.contextmanager
def exclusive(device: torch.device, timeout_s: float | None = None) -> Iterator[bool]:
    """The GPU to this worker alone for a measurement; yields whether it holds the lock exclusive (False
    without a lock, or when ``timeout_s`` passed first: then it measures anyway, as without a lock)."""
    if LOCK is None:
        yield False
        return
    if LOCK.state == EXCLUSIVE:  # nested (an autotuning benchmark inside a timed call): already alone
        yield True
        return
    was = LOCK.state
    _sync(device)  # this worker's queued work is done before it lets go of its shared hold
    LOCK.release()
    got = LOCK.acquire(EXCLUSIVE, timeout_s)
    try:
        yield got
    finally:
        with contextlib.suppress(Exception):  # the measured work is finished before anyone else may run
            _sync(device)  # (a device that fails here has nothing left running: the health check says so)
        if got:
            LOCK.release()
        if was == SHARED:
            LOCK.acquire(SHARED)


def lost(expect: str | None = None) -> str | None:
    """Why this worker's lock can no longer be trusted: candidate code closed or replaced its descriptors, or
    (``expect``: the mode the judge holds it in now) released it."""
    if LOCK is None:
        return None
    problem = LOCK.lost()
    if problem is None and expect is not None and LOCK.state != expect:
        problem = f"the GPU lock this worker held {expect} is {LOCK.state} (released by other code)"
    return problem or (LOCK.unheld() if expect is not None else None)


def _hook_inductor_benchmarks(device: torch.device) -> str | None:
    """Inductor's autotuning benchmarks (the compile baselines' first call) run exclusive: through torch's
    hook (2.13: ``set_gpu_benchmark_lock_context``, which wants nested entry supported) or, before it, its
    benchmarker's ``benchmark_gpu`` wrapped on the instance. Which one (None: neither could be placed)."""
    try:
        from torch._inductor.runtime import benchmarking
    except Exception:  # noqa: BLE001 - no inductor: nothing of it to lock
        return None
    hook = getattr(benchmarking, "set_gpu_benchmark_lock_context", None)
    if hook is not None:
        hook(lambda: exclusive(device))
        return "hook"
    bench = getattr(benchmarking, "benchmarker", None)
    original = getattr(bench, "benchmark_gpu", None)
    if original is None:
        return None

    def benchmark_gpu(*args, **kwargs):
        with exclusive(device):
            return original(*args, **kwargs)

    bench.benchmark_gpu = benchmark_gpu  # the instance's attribute: every autotuner holds this one object
    return "wrapped"
