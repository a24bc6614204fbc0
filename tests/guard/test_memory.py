"""Poison patterns and never-written output detection."""

from __future__ import annotations

import pytest
import torch

from kernels_env.guard import _checks, poison_tensor, poisoned_count, poisoned_output_violations


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64]
)
def test_poison_is_nan_in_every_float_format(dtype):
    t = poison_tensor(torch.empty(7, dtype=dtype))
    real = torch.view_as_real(t) if t.is_complex() else t
    assert torch.isnan(real).all()
    assert poisoned_count(t)[0] == t.numel() * (2 if t.is_complex() else 1)


def test_reads_at_any_even_offset_are_nan():
    import numpy as np

    raw = poison_tensor(torch.empty(34, dtype=torch.uint8)).numpy().tobytes()
    for offset in (0, 2, 6):  # a kernel reading 4- or 8-byte words at a 2-byte misalignment still sees NaN
        assert np.isnan(np.frombuffer(raw, dtype=np.float32, count=4, offset=offset)).all()
        assert np.isnan(np.frombuffer(raw, dtype=np.float64, count=2, offset=offset)).all()


def test_odd_sized_storages_are_fully_poisoned():
    t = poison_tensor(torch.empty(5, dtype=torch.uint8))
    assert t.tolist() == [0xF1, 0x7F, 0xF1, 0x7F, 0xF1]


def test_partially_written_output():
    out = poison_tensor(torch.empty(4, 4))
    out[:2] = 1.0
    n, first = poisoned_count(out)
    assert n == 8 and first == [2, 0]
    v = poisoned_output_violations((torch.ones(2), out))
    assert v and v[0].check == _checks.POISONED_OUTPUT and v[0].evidence["output"] == 1


def test_computed_nans_are_not_poison():
    t = torch.tensor([float("nan"), 0.0]) * 1.0
    assert poisoned_count(t)[0] == 0
    assert poisoned_count(torch.zeros(3, dtype=torch.int32))[0] == 0  # integers are never judged by pattern
