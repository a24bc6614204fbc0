"""Roofline floor and speedup flags (catalogue #16)."""

from __future__ import annotations

import pytest
import torch

from kernels_env.guard import _checks, roofline_floor_s, speed_violations, speedup_flags, timed_call


def test_floor_counts_compulsory_traffic():
    x = torch.empty(1024, 1024)  # 4 MiB in, 4 MiB out
    floor = roofline_floor_s([x], [x], peak_bandwidth_bytes_s=4e12)
    assert floor == pytest.approx(2 * 4 * 2**20 / 4e12)
    assert roofline_floor_s([x], [x], 4e12, flops=1e12, peak_flops=1e14) == pytest.approx(1e-2)


def test_faster_than_physics_is_rejected():
    floor = 1e-5
    assert speed_violations(2e-5, floor) == []
    assert speed_violations(1e-7, floor)[0].check == _checks.BELOW_ROOFLINE


def test_big_speedups_are_flagged_for_review():
    assert speedup_flags({"eager": 3.0, "compile": 40.0}) == ["compile"]


def test_timed_call_uses_clocks_captured_before_the_candidate(monkeypatch):
    import time

    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)  # a candidate's patch
    out, seconds = timed_call(lambda: time.sleep(0.02) or 5)
    assert out == 5 and seconds >= 0.015


@pytest.mark.gpu
def test_side_stream_work_is_inside_the_device_wide_measurement():
    import cupy as cp

    spin = cp.RawKernel(
        r"""
extern "C" __global__ void spin(long long c) { long long s = clock64(); while (clock64() - s < c) {} }
""",
        "spin",
    )
    side = torch.cuda.Stream()

    def candidate():
        side.wait_stream(torch.cuda.current_stream())
        with cp.cuda.ExternalStream(side.cuda_stream):
            spin((1,), (1,), (cp.int64(40_000_000),))  # ~20 ms on the side stream, not joined

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    candidate()
    end.record()
    end.synchronize()
    naive = start.elapsed_time(end) / 1e3  # what an event timer on the current stream reports
    _, honest = timed_call(candidate, device="cuda")
    assert honest > 5e-3 and honest > 10 * naive, (naive, honest)
