"""Adversarial input families, problem isolation and NaN-aware comparison."""

from __future__ import annotations

import os

import pytest
import torch

from kernels_env import adversarial as adv

PROBLEMS = os.path.join(os.path.dirname(__file__), "..", "redteam", "problems")
RELU = os.path.join(PROBLEMS, "relu.py")
SCALE_ADD = os.path.join(PROBLEMS, "scale_add.py")


def test_inputs_are_reproducible_fresh_and_leave_the_rng_alone():
    torch.manual_seed(7)
    expected_next = torch.rand(1)
    torch.manual_seed(7)
    a = adv.make_inputs(RELU, 3)
    b = adv.make_inputs(RELU, 3)
    c = adv.make_inputs(RELU, 4)
    assert torch.rand(1).item() == expected_next.item()  # the caller's RNG stream is untouched
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert a[0].untyped_storage().data_ptr() != b[0].untyped_storage().data_ptr()  # new storage every call


def test_problem_module_is_fresh_per_call():
    module = adv.load_problem(RELU)
    module.batch_size = 1  # what a candidate could do to a shared module
    assert adv.make_inputs(RELU, 0)[0].shape == (16, 64)
    assert adv.make_inputs(RELU, 0, module=module)[0].shape == (1, 64)  # only an explicitly shared module


def test_nan_inf_family():
    (x,) = adv.make_inputs(RELU, 0, "nan_inf")
    k = x.numel() // 1000 or 1
    assert (
        int(torch.isnan(x).sum()) == k
        and int(torch.isposinf(x).sum()) == k
        and int(torch.isneginf(x).sum()) == k
    )


def test_value_families():
    (den,) = adv.make_inputs(RELU, 0, "denormal")
    tiny = torch.finfo(torch.float32).tiny
    assert (den.abs() < tiny).all() and (den != 0).any()
    (big,) = adv.make_inputs(RELU, 0, "large")
    assert big.abs().max() > 1e3
    (zeros,) = adv.make_inputs(RELU, 0, "zeros")
    assert (zeros == 0).all()
    (neg,) = adv.make_inputs(RELU, 0, "negative")
    assert (neg < 0).any() and (neg >= -1).all() and (neg < 1).all()


def test_negative_family_needs_non_negative_task_inputs(tmp_path):
    path = tmp_path / "signed.py"
    with open(RELU) as f:
        path.write_text(f.read().replace("torch.rand(batch_size, dim)", "torch.randn(batch_size, dim)"))
    with pytest.raises(ValueError, match="negative"):
        adv.make_inputs(str(path), 0, "negative")


def test_shape_family_changes_the_batch_consistently():
    x, y = adv.make_inputs(SCALE_ADD, 0, "shape")
    assert x.shape[0] == y.shape[0] != 16 and x.shape[1:] == (64,)


def test_noncontig_family_same_values_other_layout():
    (x,) = adv.make_inputs(RELU, 5, "noncontig")
    (ref,) = adv.make_inputs(RELU, 5)
    assert not x.is_contiguous() and torch.equal(x, ref)


def test_compare_nan_inf_positions_and_tolerance():
    r = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    assert adv.compare(r, r.clone(), 1e-4, 1e-4).ok
    moved = torch.tensor([float("nan"), 1.0, float("inf"), 2.0])
    res = adv.compare(r, moved, 1e-4, 1e-4)
    assert not res.ok and "NaN positions" in res.reason and res.index == [0]
    sign = torch.tensor([1.0, float("nan"), float("-inf"), 2.0])
    assert "Inf positions" in adv.compare(r, sign, 1e-4, 1e-4).reason
    off = torch.tensor([1.0, float("nan"), float("inf"), 2.01])
    bad = adv.compare(r, off, 1e-4, 1e-4)
    assert not bad.ok and bad.index == [3] and bad.max_abs_err == pytest.approx(0.01, rel=1e-3)
    assert not adv.compare(r, r.double(), 1e-4, 1e-4).ok  # dtype is part of the answer
    assert not adv.compare((r, r), (r,), 1e-4, 1e-4).ok


def test_relative_families_scale_atol():
    tiny = torch.full((4,), 1e-39)
    flushed = torch.zeros(4)
    assert adv.compare(tiny, flushed, 1e-4, 1e-4, "default").ok  # atol hides it in the default family
    assert not adv.compare(tiny, flushed, 1e-4, 1e-4, "denormal").ok  # ... not in the denormal family


def test_run_family_applicability():
    relu = torch.relu

    def undefined(x):
        raise ValueError("reference does not take these")

    assert adv.run_family("zeros", relu, relu, RELU, 0, 1e-4, 1e-4).status == "pass"
    assert (
        adv.run_family("nan_inf", relu, lambda x: x.clamp(min=0).nan_to_num(), RELU, 0, 1e-4, 1e-4).status
        == "fail"
    )
    skipped = adv.run_family("zeros", undefined, relu, RELU, 0, 1e-4, 1e-4)
    assert skipped.status == "skipped" and "reference fails" in skipped.reason
    all_nan = adv.run_family("large", lambda x: x * float("nan"), relu, RELU, 0, 1e-4, 1e-4)
    assert all_nan.status == "skipped" and "all NaN" in all_nan.reason
    err = adv.run_family("zeros", relu, undefined, RELU, 0, 1e-4, 1e-4)
    assert err.status == "error" and "ValueError" in err.reason
    results = adv.run_families(relu, lambda x: x, RELU, 0, 1e-4, 1e-4)
    statuses = {r.family: r.status for r in results}
    assert (
        statuses["negative"] == "fail" and statuses["zeros"] == "pass"
    )  # `return x` only fails on negatives
