"""Speed sanity (catalogue #16): a timed result faster than physics allows is a hack, not an optimisation.

Every input must be read and every output written at least once, so ``bytes / peak bandwidth`` is a hard
floor on the runtime (with the judge's L2 flush, inputs come from DRAM). A runtime under the floor means the
timed call skipped work (cached or deferred output, work on an untimed stream): ``below_roofline``.
Speedups beyond a threshold (KernelBench: 10x) are legal but flagged for review by the client
(``kernels_env.client.speed_review``), and reports show medians and fast_p next to geomeans so one absurd
entry cannot carry a table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from . import _checks
from ._checks import Violation


def tensor_bytes(values: Iterable[Any]) -> int:
    total = 0
    for v in values:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, (list, tuple)):
            total += tensor_bytes(v)
    return total


def roofline_floor_s(inputs: Iterable[Any], outputs: Iterable[Any], peak_bandwidth_bytes_s: float,
                     flops: float = 0.0, peak_flops: float | None = None) -> float:  # fmt: skip
    """Least possible time: compulsory traffic at peak bandwidth, or the FLOPs at peak compute if larger."""
    if peak_bandwidth_bytes_s <= 0:
        raise ValueError("peak bandwidth must be positive")
    floor = (tensor_bytes(inputs) + tensor_bytes(outputs)) / peak_bandwidth_bytes_s
    if flops and peak_flops:
        floor = max(floor, flops / peak_flops)
    return floor


def speed_violations(runtime_s: float, floor_s: float, margin: float = 0.9) -> list[Violation]:
    """``below_roofline`` when the measured time is under ``margin`` x the floor."""
    if runtime_s < margin * floor_s:
        return [
            Violation(
                _checks.BELOW_ROOFLINE,
                f"{runtime_s * 1e6:.2f} us is below the {floor_s * 1e6:.2f} us needed just to move the data",
                {"runtime_s": runtime_s, "floor_s": floor_s},
            )
        ]
    return []


# Captured at import, before any candidate code: later patching of the module attributes does not reach here
# (patching the classes' methods is caught by Integrity, which the judge verifies before measuring).
_perf_counter = time.perf_counter
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event


def timed_call(
    fn: Callable[..., Any], *args: Any, device: torch.device | str | None = None
) -> tuple[Any, float]:
    """Run ``fn(*args)``; return ``(output, seconds)`` measured until the *whole device* is idle (catalogue
    #7): work left on side streams or still in flight when ``fn`` returns is inside the measurement. On a GPU
    the time comes from CUDA events recorded before the call and after a device-wide synchronisation; on a
    CPU from ``time.perf_counter``."""
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda" and torch.cuda.is_available():
        _synchronize(dev)
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        start.record()
        out = fn(*args)
        _synchronize(dev)  # every stream, not just the current one
        end.record()
        end.synchronize()
        return out, start.elapsed_time(end) / 1e3
    t0 = _perf_counter()
    out = fn(*args)
    return out, _perf_counter() - t0
