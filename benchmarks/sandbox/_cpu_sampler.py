"""The host's CPU use while a benchmark runs, from ``/proc/stat`` (Linux): is the host saturated?

    with CpuSampler() as cpu:
        ...                                   # the work
    cpu.summary(start, end)                   # a window, in seconds since the sampler started

``busy`` is every jiffy but idle, iowait and steal, over all cores. The summary gives the mean share of all
cores busy, the busy core-seconds and the cores: a share near 1.0 means the host, not the workers, set the
pace. ``steal_share``: time the hypervisor gave this machine's virtual CPUs to others (a slow run on a shared
host shows here). ``host()`` names the CPU model and threads per core: runs on different hosts of one kind
differ by their cores. Elsewhere (no /proc/stat) the summary is ``None``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def _read() -> tuple[int, int, int] | None:
    """(busy, total, steal) jiffies over all cores."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal guest guest_nice; guest time is already in user/nice
    fields = fields[:8] + [0] * (8 - len(fields[:8]))
    idle, steal = fields[3] + fields[4], fields[7]
    total = sum(fields)
    return total - idle - steal, total, steal


def host() -> dict:
    """The CPU model, logical CPUs and threads per core (``/proc/cpuinfo``; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info: dict = {"logical_cpus": os.cpu_count()}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and "model" not in info:
            info["model"] = value
        elif key == "siblings" and "siblings" not in info:
            info["siblings"] = int(value)
        elif key == "cpu cores" and "cpu_cores" not in info:
            info["cpu_cores"] = int(value)
    if info.get("siblings") and info.get("cpu_cores"):
        info["threads_per_core"] = info["siblings"] // info["cpu_cores"]
    return info


class CpuSampler:
    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self.samples: list[tuple[float, int, int, int]] = []  # (seconds since start, busy, total, steal)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="cpu-sampler")
        self.t0 = time.perf_counter()

    def start(self) -> CpuSampler:
        """Start sampling now (``t0``: the windows' origin)."""
        self.t0 = time.perf_counter()
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(timeout=5)
            self._sample()

    def __enter__(self) -> CpuSampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _sample(self) -> None:
        read = _read()
        if read is not None:
            self.samples.append((time.perf_counter() - self.t0, *read))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def summary(self, start: float | None = None, end: float | None = None) -> dict | None:
        """Mean busy share of all cores between the samples nearest ``start`` and ``end`` (seconds since the
        sampler started; default: all), the busy core-seconds there, the cores and the window."""
        pts = [s for s in self.samples if (start is None or s[0] >= start) and (end is None or s[0] <= end)]
        if len(pts) < 2 or pts[-1][2] <= pts[0][2]:
            return None
        (t_a, busy_a, total_a, steal_a), (t_b, busy_b, total_b, steal_b) = pts[0], pts[-1]
        cores = os.cpu_count() or 1
        share = (busy_b - busy_a) / (total_b - total_a)
        return {
            "busy_share": round(share, 3),
            "steal_share": round((steal_b - steal_a) / (total_b - total_a), 3),
            "busy_core_s": round(share * cores * (t_b - t_a), 1),
            "cores": cores,
            "window_s": [round(t_a, 1), round(t_b, 1)],
        }
