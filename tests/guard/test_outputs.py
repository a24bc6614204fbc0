"""Output contract: plain tensors with real storage, matching the reference; determinism; constants."""

from __future__ import annotations

import torch

from kernels_env.guard import (
    _checks,
    check_outputs,
    constant_output_violation,
    determinism_violations,
    layout_notes,
    reused_output_violations,
)

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
    assert only(torch.rand(6, 4).t(), REF.t().contiguous().t()) == []


def test_any_dense_memory_format_is_accepted_and_noted():
    """KernelBench compares values and shapes: a dense, non-overlapping output in another memory format
    (channels-last, transposed) is accepted, and the stride difference is noted."""
    ref4 = torch.rand(2, 3, 4, 5)
    channels_last = torch.rand(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert not channels_last.is_contiguous()
    assert only(channels_last, ref4) == []
    assert only(torch.rand(6, 4).t()) == []
    (note,) = layout_notes(channels_last, ref4)
    assert str(channels_last.stride()) in note and str(ref4.stride()) in note
    assert layout_notes(torch.rand(2, 3, 4, 5), ref4) == []  # same strides: nothing to note


def test_expanded_and_overlapping_outputs_stay_rejected():
    """What the relaxed stride rule must still refuse: one storage slot behind several elements (stride 0,
    overlap). Gapped views are accepted (tests/guard/test_honest_solutions.py, issue 31)."""
    base = torch.rand(64)
    assert only(torch.rand(6).expand(4, 6)) == [_checks.OUTPUT_STRIDES]
    assert only(torch.rand(1, 6).expand(4, 6)) == [_checks.OUTPUT_STRIDES]
    assert only(base.as_strided((4, 6), (1, 1))) == [_checks.OUTPUT_STRIDES]  # overlapping windows
    assert only(base.as_strided((4, 6), (6, 2))) == [_checks.OUTPUT_STRIDES]  # rows overlap at stride 2
    channels_last = torch.rand(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    expanded = channels_last[:, :1].expand(2, 3, 4, 5)
    assert only(expanded, torch.rand(2, 3, 4, 5)) == [_checks.OUTPUT_STRIDES]


def test_two_calls_returning_one_storage_are_caught():
    """A static output buffer (a replayed CUDA graph's, one kept from __init__): the second answer
    overwrote the first one the caller still holds."""
    static = torch.rand(4, 6)
    found = reused_output_violations([static, static, static])
    assert [v.check for v in found] == [_checks.OUTPUT_REUSED]
    assert found[0].evidence["calls"] == [1, 2]
    assert reused_output_violations([(static[:2], static[2:])]) == []  # one call: views of one buffer
    assert reused_output_violations([torch.rand(4, 6), torch.rand(4, 6), torch.rand(4, 6)]) == []
    assert reused_output_violations([(torch.rand(2), static), (torch.rand(2), static[1:])]) != []


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
