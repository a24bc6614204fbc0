"""Output comparison: allclose semantics (checked against numpy), NaN/Inf awareness, structure, mismatch
details (first index, max abs/rel error)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels_env.judge.check.compare import compare, max_errors

TOL = {"float32": [1e-4, 1e-4], "float64": [1e-4, 1e-4], "float16": [1e-2, 1e-2], "bfloat16": [1e-2, 1e-2]}


def test_equal_outputs_pass():
    x = torch.rand(4, 5)
    assert compare(x, x.clone(), TOL) is None
    assert compare((x, [x, 3]), (x.clone(), [x.clone(), 3]), TOL) is None


@pytest.mark.parametrize("seed", range(5))
def test_value_check_agrees_with_numpy_allclose(seed):
    g = torch.Generator().manual_seed(seed)
    expected = torch.randn(64, generator=g)
    got = expected + torch.randn(64, generator=g) * 2e-4  # some elements in, some out of tolerance
    ok = np.allclose(
        got.numpy().astype(np.float64), expected.numpy().astype(np.float64), atol=1e-4, rtol=1e-4
    )
    bad = compare(expected, got, TOL)
    assert (bad is None) == ok
    if bad is not None:
        close = np.isclose(got.numpy(), expected.numpy(), atol=1e-4, rtol=1e-4)
        first = int(np.argmin(close))
        assert bad["first_index"] == [first]
        assert bad["num_mismatched"] == int((~close).sum())
        diff = np.abs(got.numpy().astype(np.float64) - expected.numpy().astype(np.float64))
        assert bad["max_abs_error"] == pytest.approx(diff.max(), rel=1e-5)


def test_tolerance_boundary_and_first_index_in_nd():
    expected = torch.ones(2, 3, 4)
    got = expected.clone()
    got[1, 2, 3] += 1.5e-4  # atol + rtol * 1 = 2e-4: inside
    assert compare(expected, got, TOL) is None
    got[1, 0, 2] += 3e-4  # outside
    got[1, 2, 3] += 1.0  # outside, later in memory order
    bad = compare(expected, got, TOL)
    assert bad["reason"] == "values"
    assert bad["first_index"] == [1, 0, 2]
    assert bad["num_mismatched"] == 2
    assert bad["max_abs_error"] == pytest.approx(1.00015, rel=1e-4)
    assert "first at index [1, 0, 2]" in bad["text"]


def test_half_precision_uses_its_own_tolerance():
    expected = torch.ones(8, dtype=torch.float16)
    assert compare(expected, expected + 5e-3, TOL) is None
    assert compare(expected, expected + 5e-2, TOL)["reason"] == "values"


def test_nan_positions_must_match():
    expected = torch.tensor([1.0, float("nan"), 3.0])
    assert compare(expected, expected.clone(), TOL) is None
    moved = torch.tensor([float("nan"), 2.0, 3.0])
    bad = compare(expected, moved, TOL)
    assert bad["nan_positions_differ"] == 2 and bad["first_index"] == [0]
    assert bad["got"] == "nan"  # JSON-safe


def test_infinities_must_match_exactly():
    expected = torch.tensor([float("inf"), -float("inf"), 1.0])
    assert compare(expected, expected.clone(), TOL) is None
    bad = compare(expected, torch.tensor([float("inf"), float("inf"), 1.0]), TOL)
    assert bad["first_index"] == [1] and bad["inf_mismatched"] == 1
    assert compare(expected, torch.tensor([1e38, -float("inf"), 1.0]), TOL)["first_index"] == [0]


@pytest.mark.parametrize(
    ("got", "reason"),
    [
        (torch.zeros(3, 5), "shape"),
        (torch.zeros(4, 5, dtype=torch.float64), "dtype"),
        ([torch.zeros(4, 5)], "type"),
        (None, "type"),
        (np.zeros((4, 5), dtype=np.float32), "type"),
    ],
)
def test_structural_mismatches(got, reason):
    bad = compare(torch.zeros(4, 5), got, TOL)
    assert bad["reason"] == reason


def test_tensor_subclass_is_not_a_plain_output():
    class Lazy(torch.Tensor):
        pass

    x = torch.zeros(3)
    assert compare(x, x.clone().as_subclass(Lazy), TOL)["reason"] == "type"


def test_tuples_and_integers():
    a = torch.arange(6)
    assert compare((a, a), (a, a + 0), TOL) is None
    bad = compare((a, a), (a, a + 1), TOL)
    assert bad["where"] == "output[1]" and bad["atol"] == 0.0
    assert compare((a,), (a, a), TOL)["reason"] == "structure"
    assert compare(torch.tensor([True, False]), torch.tensor([True, True]), TOL)["first_index"] == [1]


def test_max_errors_for_the_record():
    e = torch.tensor([1.0, 2.0, float("nan")])
    g = torch.tensor([1.5, 2.0, float("nan")])
    abs_err, rel_err = max_errors(e, g)
    assert abs_err == pytest.approx(0.5) and rel_err == pytest.approx(0.5)


def test_timing_clock_choice_never_lets_side_streams_help():
    from kernels_env.judge.timing.timer import choose_clock

    stream = [0.200, 0.201, 0.199, 0.200]
    honest = choose_clock(stream, [0.2150, 0.2160, 0.2140, 0.2150], overhead_ms=0.015)
    assert honest["clock"] == "cuda_event_stream" and honest["samples"] == stream
    assert honest["side_stream_ms"] == 0.0
    # 0.5 ms of work finished on another stream after the current stream's event: the device clock wins.
    cheat = choose_clock([0.010] * 4, [0.525] * 4, overhead_ms=0.015)
    assert cheat["clock"] == "cuda_event_device_sync"
    assert cheat["samples"] == [0.51] * 4 and abs(cheat["side_stream_ms"] - 0.5) < 1e-9
    # never below zero after subtracting the harness's own round trip
    assert choose_clock([0.001], [0.0], overhead_ms=0.015)["samples"] == [0.001]
