"""The kernelbench policy: PyTorch glue next to custom kernels, minus what the runtime checks prove a hack.

Also the false positives issue 12 found in every policy: a no-op ``.to()`` reported as ``guard_bypass``
and ``record_stream`` on an input reported as ``input_mutation``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from guard_helpers import guarded

from kernels_env.guard import _checks, policy_guard
from kernels_env.guard._census import Census, KernelLaunch, torch_op_summary
from kernels_env.guard._checks import GuardViolation
from kernels_env.guard._trace import _is_forwarding_composite
from kernels_env.rules.operators import BLAS, CUSTOM, TORCH_KERNEL
from kernels_env.rules.policies import get_policy

X = torch.rand(8, 8)
LIN = nn.Linear(8, 8)

GLUE = {
    "add": lambda: X + 1,
    "cat": lambda: torch.cat([X, X]),
    "relu": lambda: torch.relu(X),
    "mean": lambda: X.mean(dim=1),
    "sum": lambda: X.sum(),
    "gelu": lambda: F.gelu(X),
    "mul": lambda: X * X,
    "softmax": lambda: F.softmax(X, dim=1),
    "nn.Linear": lambda: LIN(X),
    "nn.LayerNorm": lambda: nn.LayerNorm(8)(X),
    "copying contiguous()": lambda: X.t().contiguous(),
    "dtype cast": lambda: X.to(torch.float64),
}


@pytest.mark.parametrize("name", sorted(GLUE))
def test_kernelbench_allows_pytorch_glue_and_strict_does_not(name):
    # os_threads off as on the judge's first call: a first CPU kernel may start torch's intra-op pool
    _, err = guarded(GLUE[name], "kernelbench", os_threads=False)
    assert err is None, err
    _, err = guarded(GLUE[name], "strict")
    assert err is not None and err.check == _checks.FORBIDDEN_OP, err


def test_kernelbench_keeps_host_escapes_and_raw_memory_forbidden():
    """Glue is PyTorch on the device; data pulled to the host or raw unpoisoned memory is not glue (host work
    takes no device time, so it would also dodge the custom-work share)."""
    for fn, check in (
        (lambda: X.sum().item(), _checks.HOST_ESCAPE),
        (lambda: X.tolist(), _checks.HOST_ESCAPE),
        (lambda: torch.equal(X, X), _checks.HOST_ESCAPE),
        (lambda: torch.empty(0).set_(torch.UntypedStorage(64)), _checks.FORBIDDEN_OP),
    ):
        _, err = guarded(fn, "kernelbench")
        assert err is not None and err.check == check, err


def test_glue_writing_into_an_input_is_still_a_mutation():
    x = torch.rand(8)
    _, err = guarded(lambda: x.add_(1), "kernelbench", inputs=[x])
    assert err is not None and err.check == _checks.INPUT_MUTATION, err


def test_other_policies_are_unchanged():
    assert not get_policy("strict").allow_torch_glue and not get_policy("cuda_agent").allow_torch_glue
    assert get_policy("cuda_agent").decide("aten", "relu", "compiled") == "forbidden"
    assert get_policy("cuda_agent").decide("aten", "mm", "python") == "forbidden"
    assert get_policy("kernelbench").decide("aten", "relu", "python") == "allowed"
    assert get_policy("kernelbench").decide("aten", "set_", "python") == "raw_memory"


# -- torch_ops: what the verdict lists ----------------------------------------------------------------------
def test_torch_ops_counts_the_compute_that_ran():
    def forward():
        y = torch.empty(8, 8)  # allocation, views and metadata are not listed
        y = X.view(64).view(8, 8) + 1
        return torch.relu(y) * 2 + X

    with torch.no_grad(), policy_guard("kernelbench", census=False) as g:
        g(forward)
    assert g.torch_op_summary == [
        {"op": "aten::add", "count": 2, "share": None},
        {"op": "aten::mul", "count": 1, "share": None},
        {"op": "aten::relu", "count": 1, "share": None},
    ]


def test_torch_op_shares_come_from_the_census():
    census = Census(
        "cuda-profiler",
        [
            KernelLaunch("gemm", BLAS, 60.0, "aten::linear", "aten::addmm"),
            KernelLaunch("elementwise", TORCH_KERNEL, 10.0, "aten::add", "aten::add"),
            KernelLaunch("my_kernel", CUSTOM, 30.0),
        ],
    )
    summary = torch_op_summary({"aten::add": 3, "aten::addmm": 1}, census)
    assert summary == [
        {"op": "aten::add", "count": 3, "share": pytest.approx(0.1)},
        {"op": "aten::addmm", "count": 1, "share": pytest.approx(0.6)},
    ]


# -- pass-through of the reference Model (KernelBench's inheritance bypass) ----------------------------------
class Model(nn.Module):  # the reference
    def forward(self, x):
        return torch.relu(x) + 1


class CopiedModel(nn.Module):  # the reference's source pasted into the solution
    def forward(self, x):
        return torch.relu(x) + 1


class InheritsForward(CopiedModel):
    pass


class CallsSuper(CopiedModel):
    def forward(self, x):
        return super().forward(x)


class OwnForward(CopiedModel):  # subclasses the copy, but computes in a forward of its own
    def forward(self, x):
        return torch.relu(x) + 2


class ReadsLikeTheReference(nn.Module):  # its own forward, identical bytecode: never suspected
    def forward(self, x):
        return torch.relu(x) + 1


def _run(model, policy="kernelbench"):
    try:
        with torch.no_grad(), policy_guard(policy, inputs=[X], reference=[Model(), Model], census=False) as g:
            g(model, X)
        return None
    except GuardViolation as exc:
        return exc


@pytest.mark.parametrize("model", [InheritsForward(), CallsSuper()], ids=["inherits", "super"])
def test_a_pass_through_of_the_reference_is_rejected(model):
    err = _run(model)
    assert err is not None and err.check == _checks.REFERENCE_PASSTHROUGH, err
    assert err.evidence["base"] == "CopiedModel" and "test_kernelbench_policy.py" in err.evidence["frame"]


def test_own_forwards_are_not_pass_throughs():
    assert _run(OwnForward()) is None
    assert _run(ReadsLikeTheReference()) is None


def test_a_real_reference_subclass_is_caught_as_the_reference():
    class SubclassesTheReference(Model):
        pass

    err = _run(SubclassesTheReference(), "strict")
    assert err is not None and err.check == _checks.REFERENCE_MODEL_CALLED, err


# -- .to(): a no-op is nothing, a conversion is data movement, a hidden one is a bypass ----------------------
NO_OP_TO = {
    "same dtype": lambda: X.to(torch.float32),
    "same device": lambda: X.to("cpu"),
    "float() of float": lambda: X.float(),
    "type_as": lambda: X.type_as(X),
    "same tensor options": lambda: X.to(X),
}


@pytest.mark.parametrize("name", sorted(NO_OP_TO))
@pytest.mark.parametrize("policy", ["strict", "cuda_agent", "kernelbench"])
def test_a_no_op_to_is_not_a_guard_bypass(name, policy):
    """``aten::to`` is CompositeImplicitAutograd: as a no-op it returns self and dispatches nothing, so the
    profiler records it with no guard marker under it. It used to be reported as ``guard_bypass`` because
    its TorchScript-only overloads (``to.prim_dtype`` ...) made the composite test fail."""
    out, err = guarded(NO_OP_TO[name], policy)
    assert err is None, err
    assert out is X
    assert _is_forwarding_composite("aten::to")


def test_a_converting_to_is_data_movement():
    _, err = guarded(lambda: X.to(torch.float64), "strict")
    assert err is not None and err.check == _checks.FORBIDDEN_OP and "_to_copy" in err.evidence["op"], err
    out, err = guarded(lambda: X.to(torch.float64), "kernelbench", os_threads=False)
    assert err is None and out.dtype == torch.float64, err


def test_a_to_that_hides_from_the_dispatch_guard_is_a_bypass():
    """The real bypass: the conversion runs with the Python dispatch key excluded; the profiler still sees
    ``aten::_to_copy`` under the (composite) ``aten::to``, with no guard marker."""

    def hidden():
        with torch._C._DisableTorchDispatch():
            return X.to(torch.float64)

    for policy in ("strict", "kernelbench"):
        _, err = guarded(hidden, policy)
        assert err is not None and err.check == _checks.GUARD_BYPASS, err
        assert err.evidence["op"] in ("aten::_to_copy", "aten::copy_", "aten::empty_strided"), err


# -- record_stream: allocator bookkeeping, not a write -------------------------------------------------------
def test_record_stream_on_an_input_is_not_a_mutation():
    """Its schema marks ``self`` as written (``Tensor(a!)``), but it only tells the caching allocator that
    another stream uses the block. Judged through the dispatch mode directly: on a CPU there is no stream to
    record (the GPU run: tests/guard/test_gpu.py::test_record_stream_on_a_side_stream_is_allowed)."""
    x = torch.rand(8)
    with torch.no_grad(), policy_guard("strict", inputs=[x], census=False) as g:
        g.dispatch_mode._judge(torch.ops.aten.record_stream.default, (x, None), {})
        with pytest.raises(GuardViolation) as caught:  # control: a real write into the same input
            g.dispatch_mode._judge(torch.ops.aten.fill_.Scalar, (x, 0.0), {})
        assert caught.value.check == _checks.INPUT_MUTATION
        g.violations.clear()  # the control's violation is the test's own
