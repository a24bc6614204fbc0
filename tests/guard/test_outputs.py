"""Output contract: plain tensors with real storage, matching the reference; determinism; constants."""

from __future__ import annotations

import torch

from kernels_env.guard import _checks, check_outputs, constant_output_violation, determinism_violations

REF = torch.rand(4, 6)


def only(candidate, reference=REF, inputs=()):
    return [v.check for v in check_outputs(candidate, reference, inputs)]


class Sub(torch.Tensor):
    pass


class Liar:
    @property
    def __class__(self):
        return torch.Tensor


def test_plain_tensor_passes():
    assert only(torch.rand(4, 6)) == []
    assert only((torch.rand(4, 6), 3), (REF, 3)) == []


def test_type_and_structure():
    assert only(torch.rand(4, 6).as_subclass(Sub)) == [_checks.OUTPUT_TYPE]
    assert only(Liar()) == [_checks.OUTPUT_TYPE]
    assert only(torch.rand(4, 6).numpy()) == [_checks.OUTPUT_TYPE]
    assert only(torch.rand(4, 6), (REF, REF)) == [_checks.OUTPUT_TYPE]
    assert only((REF,), (REF, REF)) == [_checks.OUTPUT_TYPE]


def test_storage():
    assert only(torch.empty(4, 6, device="meta")) == [_checks.OUTPUT_STORAGE]
    assert only(torch.rand(4, 6).to_sparse()) == [_checks.OUTPUT_STORAGE]
    lazy = torch.rand(4, 6, dtype=torch.complex64).conj()
    assert only(lazy, torch.rand(4, 6, dtype=torch.complex64)) == [_checks.OUTPUT_STORAGE]


def test_dtype_shape_strides():
    assert only(torch.rand(4, 6, dtype=torch.float16)) == [_checks.OUTPUT_DTYPE]
    assert only(torch.rand(6, 4)) == [_checks.OUTPUT_SHAPE]
    assert only(torch.rand(6).expand(4, 6)) == [_checks.OUTPUT_STRIDES]
    assert only(torch.rand(6, 4).t()) == [_checks.OUTPUT_STRIDES]  # transposed, unlike the reference
    assert only(torch.rand(6, 4).t(), REF.t().contiguous().t()) == []  # ... unless the reference is too


def test_aliasing_an_input():
    x = torch.rand(4, 6)
    assert only(x, REF, [x]) == [_checks.OUTPUT_ALIASES_INPUT]
    assert only(x[:], REF, [x]) == [_checks.OUTPUT_ALIASES_INPUT]
    assert [v.check for v in check_outputs(x, REF, [x], reference_aliases_input=True)] == []


def test_determinism():
    a = torch.rand(100)
    assert determinism_violations(a, a + 1e-7, 1e-4, 1e-4) == []  # atomics-sized differences
    assert determinism_violations(a, a + 1e-2, 1e-4, 1e-4)[0].check == _checks.NONDETERMINISTIC
    b = a.clone()
    b[3] = float("nan")
    assert determinism_violations(a, b, 1e-4, 1e-4)[0].check == _checks.NONDETERMINISTIC


def test_constant_output():
    ref = torch.rand(64)
    assert constant_output_violation(torch.full((64,), 0.5), ref, 1e-4, 1e-4).check == _checks.CONSTANT_OUTPUT
    assert constant_output_violation(torch.zeros(64), ref, 1e-4, 1e-4).check == _checks.CONSTANT_OUTPUT
    assert constant_output_violation(ref.clone(), ref, 1e-4, 1e-4) is None
    flat_ref = torch.full((64,), 3.0)
    assert constant_output_violation(torch.full((64,), 3.0), flat_ref, 1e-4, 1e-4) is None  # the task's fault
