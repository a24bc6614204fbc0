"""Roofline floor and speedup flags (catalogue #16)."""

from __future__ import annotations

import pytest
import torch

from kernels_env.guard import _checks, roofline_floor_s, speed_violations, speedup_flags


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
