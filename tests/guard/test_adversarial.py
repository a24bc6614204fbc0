"""Adversarial input families (registered in kernels_env.judge.check.inputs), problem isolation, and how the
judge compares and reports a family (kernels_env.judge.run.families)."""

from __future__ import annotations

import os
import types

import pytest
import torch

from kernels_env.judge.check import adversarial as adv
from kernels_env.judge.check.compare import compare
from kernels_env.judge.check.inputs import FAMILIES, make_inputs, problem_module
from kernels_env.judge.run import families as fam

PROBLEMS = os.path.join(os.path.dirname(__file__), "..", "redteam", "problems")
RELU = os.path.join(PROBLEMS, "relu.py")
SCALE_ADD = os.path.join(PROBLEMS, "scale_add.py")
TOL = {"float32": [1e-4, 1e-4], "float64": [1e-4, 1e-4], "float16": [1e-2, 1e-2], "bfloat16": [1e-2, 1e-2]}


def test_every_family_is_registered_and_known_to_the_judge_settings():
    from kernels_env.rules.protocols import DEFAULT_FAMILIES
    from kernels_env.rules.protocols import FAMILIES as KNOWN

    assert set(adv.ALL_FAMILIES) <= set(FAMILIES)
    assert set(KNOWN) == set(adv.ALL_FAMILIES) | {fam.INIT_ARGS}
    assert set(DEFAULT_FAMILIES) == set(adv.DEFAULT_FAMILIES) | {fam.INIT_ARGS}


def test_inputs_are_reproducible_fresh_and_the_seed_cannot_be_replayed():
    a = make_inputs(RELU, 3)
    b = make_inputs(RELU, 3)
    c = make_inputs(RELU, 4)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert a[0].untyped_storage().data_ptr() != b[0].untyped_storage().data_ptr()  # new storage every call
    after = torch.rand(1)
    torch.manual_seed(3)
    torch.rand(16, 64)
    assert after.item() != torch.rand(1).item()  # the RNG was reseeded from OS entropy afterwards


def test_problem_module_is_fresh_per_call():
    with open(RELU) as f:
        problem = types.SimpleNamespace(source=f.read(), path=RELU)
    module = problem_module(problem)
    module.batch_size = 1  # what a candidate could do to the problem module it finds
    assert make_inputs(problem, 0)[0].shape == (16, 64)  # generated from a fresh module of the source
    assert module.__file__ == os.path.abspath(RELU) or module.__file__ == RELU  # frames name the reference
    assert make_inputs(module, 0)[0].shape == (1, 64)  # only an object without a source is used as it is


def test_nan_inf_family():
    (x,) = make_inputs(RELU, 0, "nan_inf")
    k = x.numel() // 1000 or 1
    assert int(torch.isnan(x).sum()) == k
    assert int(torch.isposinf(x).sum()) == k and int(torch.isneginf(x).sum()) == k


def test_value_families():
    (den,) = make_inputs(RELU, 0, "denormal")
    tiny = torch.finfo(torch.float32).tiny
    assert (den.abs() < tiny).all() and (den != 0).any()
    (big,) = make_inputs(RELU, 0, "large")
    assert big.abs().max() > 1e3
    (zeros,) = make_inputs(RELU, 0, "zeros")
    assert (zeros == 0).all()
    (neg,) = make_inputs(RELU, 0, "negative")
    assert (neg < 0).any() and (neg >= -1).all() and (neg < 1).all()


def test_negative_family_needs_non_negative_task_inputs(tmp_path):
    path = tmp_path / "signed.py"
    with open(RELU) as f:
        path.write_text(f.read().replace("torch.rand(batch_size, dim)", "torch.randn(batch_size, dim)"))
    with pytest.raises(ValueError, match="negative"):
        make_inputs(str(path), 0, "negative")


def test_shape_family_changes_the_batch_consistently():
    x, y = make_inputs(SCALE_ADD, 0, "shape")
    assert x.shape[0] == y.shape[0] != 16 and x.shape[1:] == (64,)
    x, y = make_inputs(SCALE_ADD, 0, "shape_grow")  # a size baked into a kernel leaves a tail unwritten
    assert x.shape[0] == y.shape[0] == 24 and x.shape[1:] == (64,)
    (base,) = make_inputs(SCALE_ADD, 0)[:1]
    assert torch.equal(x[:16], base)  # the task's own rows, repeated


def test_grown_batch_stays_below_2_to_the_31_where_the_task_does():
    # KernelBench L1 #38/#39: 32768 x 65535 was chosen just below 2**31 elements; crossing it is not the task.
    assert adv._int32_batch([torch.empty(32768, 65535, device="meta")], 32768) == 32768
    assert adv._int32_batch([torch.empty(16, 2**28, device="meta")], 16) > 16 * 2**10  # already above 2**31
    assert adv._int32_batch([torch.empty(16, 64, device="meta")], 16) == (2**31 - 1) // 64


def test_noncontig_family_same_values_other_layout():
    (x,) = make_inputs(RELU, 5, "noncontig")
    (ref,) = make_inputs(RELU, 5)
    assert not x.is_contiguous() and torch.equal(x, ref)


def test_comparison_is_nan_inf_aware():
    r = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    assert compare(r, r.clone(), TOL) is None
    moved = torch.tensor([float("nan"), 1.0, float("inf"), 2.0])
    bad = compare(r, moved, TOL)
    assert bad["first_index"] == [0] and bad["nan_positions_differ"] == 2
    sign = torch.tensor([1.0, float("nan"), float("-inf"), 2.0])
    assert compare(r, sign, TOL)["inf_mismatched"] == 1
    assert compare(r, r.double(), TOL) is not None  # dtype is part of the answer


def test_relative_families_scale_atol():
    tiny = torch.full((4,), 1e-39)
    flushed = torch.zeros(4)
    assert fam.judge("zeros", True, 0, tiny, flushed, TOL)["status"] == fam.PASS  # atol hides it here
    flushed_res = fam.judge("denormal", False, 0, tiny, flushed, TOL)
    assert flushed_res["status"] == fam.FAIL and flushed_res["first_index"] == [0]  # ... not for denormals
    big = torch.full((4,), 1e4)
    assert fam.judge("large", True, 0, big, big + 0.5, TOL)["status"] == fam.PASS  # within 1e-4 relative


def test_family_applicability():
    x = torch.rand(8)
    assert fam.undefined(x, x.clone(), TOL) == ""
    assert "all NaN" in fam.undefined(x * float("nan"), x * float("nan"), TOL)
    assert "different answers" in fam.undefined(x, x + 1, TOL)  # a random reference defines nothing
    assert fam.perturbed_init_args([3, 2.0, True]) == [3, 3.25, True]  # only floats move
    assert fam.perturbed_init_args([3, "x"]) is None
    results = {
        "zeros": fam.result("zeros", True, fam.PASS),
        "nan_inf": fam.result("nan_inf", False, fam.FAIL, "NaN positions differ"),
        "shape": fam.result("shape", True, fam.ERROR, "IndexError"),
    }
    assert fam.first_fatal_failure(results) == "shape"  # reported-only failures never fail the verdict
    assert results["nan_inf"]["applicable"] and not fam.result("x", True, fam.SKIPPED)["applicable"]
