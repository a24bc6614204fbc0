"""Time a callable on rotated input sets: CUDA events around a device-wide synchronisation, cold L2.

Per timed call (CUDA): write a buffer of twice the device's L2 (evicts the previous call's data), synchronise
the device, record ``start``, call, record ``end_stream`` on the current stream, synchronise the whole device
(work the candidate put on other streams is finished), record ``end``. The reported time is
``elapsed(start, end)`` minus the harness's own overhead for the same sequence around an empty call (measured
in the same run and reported as ``overhead_ms``), so side-stream work cannot escape the clock and tiny kernels
are not inflated by the synchronisation. ``stream_median_ms`` (start to end_stream) is reported too.

On CPU (CPU mode) a monotonic clock is used and the numbers are labelled not comparable by the caller.
The clock, the device synchronisation and the event class are captured at import, before any candidate code:
a candidate that replaces ``time.perf_counter`` or ``torch.cuda.synchronize`` does not change what this
module measures (and is rejected for it: ``judge_tampered``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

_perf_counter = time.perf_counter
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event


def summarize(samples_ms: Sequence[float]) -> dict[str, float | int]:
    """median, IQR (q3 - q1), min, max, mean and count of the samples (ms)."""
    xs = sorted(samples_ms)
    if not xs:
        raise ValueError("no timing samples")
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return {
        "median_ms": statistics.median(xs),
        "iqr_ms": q3 - q1,
        "q1_ms": q1,
        "q3_ms": q3,
        "min_ms": xs[0],
        "max_ms": xs[-1],
        "mean_ms": statistics.fmean(xs),
        "count": len(xs),
    }


def time_callable(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    timing: Mapping[str, Any],
    device: torch.device,
) -> dict[str, Any]:
    """Warm up, then time ``fn(*inputs)`` with inputs rotated over ``input_sets`` (see module doc)."""
    if not input_sets:
        raise ValueError("time_callable needs at least one input set")
    if device.type == "cuda":
        return _time_cuda(fn, input_sets, timing, device)
    return _time_cpu(fn, input_sets, timing)


def _done(i: int, started: float, timing: Mapping[str, Any]) -> bool:
    if i >= timing["max_iters"]:
        return True
    return i >= timing["min_iters"] and _perf_counter() - started >= timing["target_time_s"]


def _time_cpu(fn, input_sets, timing) -> dict[str, Any]:
    for i in range(timing["warmup_iters"]):
        fn(*input_sets[i % len(input_sets)])
    samples: list[float] = []
    started = _perf_counter()
    while not _done(len(samples), started, timing):
        inputs = input_sets[len(samples) % len(input_sets)]
        t0 = _perf_counter()
        fn(*inputs)
        samples.append((_perf_counter() - t0) * 1e3)
    return {**summarize(samples), "clock": "perf_counter", "l2_flush": False}


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0)) or 64 * 2**20
    return torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)


def _time_cuda(fn, input_sets, timing, device) -> dict[str, Any]:
    flush = l2_flush_buffer(device) if timing["l2_flush"] else None

    def one_call(call: Callable[[Sequence[Any]], Any], inputs) -> tuple[float, float]:
        if flush is not None:
            flush.zero_()
        _synchronize(device)
        start.record()
        call(inputs)
        end_stream.record()
        _synchronize(device)
        end.record()
        end.synchronize()
        return start.elapsed_time(end), start.elapsed_time(end_stream)

    start, end_stream, end = (_Event(enable_timing=True) for _ in range(3))
    run = lambda inputs: fn(*inputs)
    for i in range(max(timing["warmup_iters"], 1)):
        run(input_sets[i % len(input_sets)])
    _synchronize(device)
    # The harness's own cost (event records, device sync, host round trip) around an empty call.
    overhead = [
        one_call(lambda inputs: None, input_sets[0])[0] for _ in range(max(10, timing["min_iters"] // 2))
    ]
    overhead_ms = statistics.median(overhead)
    samples: list[float] = []
    stream_samples: list[float] = []
    started = _perf_counter()
    while not _done(len(samples), started, timing):
        total, stream = one_call(run, input_sets[len(samples) % len(input_sets)])
        samples.append(max(total - overhead_ms, 0.0))
        stream_samples.append(stream)
    out = summarize(samples)
    out.update(
        raw_median_ms=statistics.median(s + overhead_ms for s in samples),
        stream_median_ms=statistics.median(stream_samples),
        overhead_ms=overhead_ms,
        clock="cuda_event_device_sync",
        l2_flush=flush is not None,
        l2_flush_bytes=flush.numel() * 4 if flush is not None else 0,
    )
    return out
