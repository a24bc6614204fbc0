"""Dispatch- and function-level interception: what the guard forbids, what it allows, and why."""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from guard_helpers import guarded

from kernels_env.guard import _checks
from kernels_env.rules.policies import POLICIES, get_policy

X = torch.rand(8, 8)
W = torch.rand(8, 8)
LIN = nn.Linear(8, 8)

FORBIDDEN = {
    "torch.matmul": lambda: torch.matmul(X, W),
    "@": lambda: X @ W,
    "tensor method relu": lambda: X.relu(),
    "F.gelu": lambda: F.gelu(X),
    "nn.Linear layer": lambda: LIN(X),
    "torch.ops.aten direct": lambda: torch.ops.aten.mm.default(X, W),
    "einsum": lambda: torch.einsum("ij,jk->ik", X, W),
    "advanced indexing": lambda: X[torch.tensor([0, 2])],
    "reduction": lambda: X.sum(dim=1),
    "copying contiguous()": lambda: X.t().contiguous(),
    "copying reshape": lambda: X.t().reshape(-1),
    "dtype cast": lambda: X.double(),
    "clone": lambda: X.clone(),
    "random numbers": lambda: torch.rand(3),
    "setitem copy": lambda: torch.empty(8, 8).__setitem__(slice(None), X),
    "raw storage adoption (set_)": lambda: torch.empty(0).set_(torch.UntypedStorage(64)),
}


@pytest.mark.parametrize("name", sorted(FORBIDDEN))
def test_strict_forbids_pytorch_compute(name):
    _, err = guarded(FORBIDDEN[name])
    assert err is not None, f"{name} was allowed"
    assert err.check == _checks.FORBIDDEN_OP, err
    assert os.path.basename(__file__) in err.evidence["frame"], err.evidence  # names the candidate's line


def test_evidence_names_the_op_origin_and_python_api():
    _, err = guarded(lambda: X @ W)
    assert err.evidence["op"] == "aten.mm.default"
    assert err.evidence["origin"] == "python"
    assert err.evidence["python_api"] == "matmul"


ALLOWED = {
    "empty": lambda: torch.empty(4, 4),
    "empty_like": lambda: torch.empty_like(X),
    "empty_strided": lambda: torch.empty_strided((4, 4), (1, 4)),
    "new_empty": lambda: X.new_empty((2, 3)),
    "zeros/ones/full": lambda: (torch.zeros(3), torch.ones(3), torch.full((2,), 7.0), torch.zeros_like(X)),
    "constant tensor": lambda: torch.tensor([1.0, 2.0]),
    "fill_/zero_ on own buffer": lambda: torch.empty(3).fill_(1.0).zero_(),
    "views": lambda: (
        X.view(64),
        X.reshape(4, 16),
        X.permute(1, 0),
        X.t(),
        X.transpose(0, 1),
        X.unsqueeze(0),
        X.unsqueeze(0).squeeze(0),
        X[:1].expand(8, 8),
        X[2:5, ::2],
        X.select(0, 1),
        X.narrow(1, 0, 3),
        X.split(2),
        X.chunk(4),
        X.unbind(0),
        X.flatten(),
        X.detach(),
        X.as_strided((2, 2), (1, 1)),
    ),
    "contiguous() on a contiguous tensor": lambda: X.contiguous(),
    "metadata": lambda: (
        X.size(),
        X.shape,
        X.stride(),
        X.dtype,
        X.device,
        X.numel(),
        X.dim(),
        X.data_ptr(),
        X.is_contiguous(),
        X.storage_offset(),
        X.untyped_storage().nbytes(),
        X.element_size(),
    ),
    "complex views": lambda: torch.view_as_real(torch.empty(4, dtype=torch.complex64)),
}


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_strict_allows_allocation_views_metadata(name):
    _, err = guarded(ALLOWED[name])
    assert err is None, err


def test_fresh_empty_memory_is_poisoned():
    out, err = guarded(lambda: torch.empty(5))
    assert err is None
    assert torch.isnan(out).all()
    from kernels_env.guard import poisoned_count

    assert poisoned_count(out)[0] == 5


def test_swallowed_violation_still_fails():
    def candidate():
        try:
            return torch.relu(X)
        except Exception:  # the candidate catches the guard's error and carries on
            return torch.empty_like(X)

    out, err = guarded(candidate)
    assert err is not None and err.check == _checks.FORBIDDEN_OP


def test_swallowed_exception_in_candidate_code():
    def candidate():
        try:
            raise ValueError("fast path unavailable")
        except ValueError:
            return torch.empty(2)

    _, err = guarded(candidate)
    assert err is not None and err.check == _checks.SWALLOWED_EXCEPTION
    assert "ValueError" in err.violation.message


def test_exceptions_handled_inside_libraries_are_not_blamed():
    import json

    def candidate():
        getattr(X, "no_such_attribute", None)
        json.loads("[1, 2]")
        return torch.empty(1)

    _, err = guarded(candidate)
    assert err is None, err


def test_plain_runtime_error_propagates_unchanged():
    def candidate():
        raise KeyError("bug in the candidate")

    with (
        pytest.raises(KeyError),
        torch.no_grad(),
        __import__("kernels_env.guard").guard.policy_guard("strict", census=False) as g,
    ):
        g(candidate)


def test_the_guards_own_out_of_memory_is_not_a_verdict(monkeypatch):
    """Out of memory in the guard's own checks after forward (e.g. its snapshot of an 8 GiB output) is the
    judge's failure: it propagates for the judge's memory plan to handle, never a guard_error/launch_error."""
    from kernels_env.guard import _guard

    finish = _guard.Guard._finish

    def no_room(self, exc):
        finish(self, exc)  # the real checks run (and stop every hook); then one of them had no room
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")

    monkeypatch.setattr(_guard.Guard, "_finish", no_room)
    with pytest.raises(torch.OutOfMemoryError):
        guarded(lambda: torch.empty(4))


def test_reference_model_instance_and_class():
    class Ref(nn.Module):
        def forward(self, x):
            return x.view(-1)  # even an allowed op: the reference must not run at all

    ref = Ref()
    _, err = guarded(lambda: ref(X), reference=ref)
    assert err is not None and err.check == _checks.REFERENCE_MODEL_CALLED
    _, err = guarded(lambda: Ref()(X), reference=Ref)
    assert err is not None and err.check == _checks.REFERENCE_MODEL_CALLED


def test_reference_code_by_file(tmp_path):
    path = tmp_path / "problem.py"
    path.write_text("def reference_forward(x):\n    return x.relu()\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    _, err = guarded(lambda: namespace["reference_forward"](X), reference_paths=[str(path)])
    assert err is not None and err.check == _checks.REFERENCE_MODEL_CALLED


def test_write_into_input_caught_at_dispatch():
    x = torch.rand(4)
    _, err = guarded(lambda: x.fill_(0.0), inputs=[x])
    assert err is not None and err.check == _checks.INPUT_MUTATION


def test_write_into_input_behind_the_dispatcher():
    import ctypes

    x = torch.rand(4)
    before = x.clone()

    def candidate():
        ctypes.memset(x.data_ptr(), 0, 4)  # a "kernel" writing the input's memory directly
        return torch.empty(1)

    _, err = guarded(candidate, inputs=[x])
    assert err is not None and err.check == _checks.INPUT_MUTATION
    assert not torch.equal(x, before)


def test_timer_and_checker_patches_are_caught_and_undone():
    real_clock, real_allclose = time.perf_counter, torch.allclose

    def candidate():
        time.perf_counter = lambda: 0.0
        torch.allclose = lambda *a, **k: True
        return torch.empty(1)

    _, err = guarded(candidate)
    assert err is not None and err.check == _checks.JUDGE_TAMPERED
    assert time.perf_counter is real_clock and torch.allclose is real_allclose


def test_tf32_flip_is_caught_and_reset():
    before = torch.backends.cuda.matmul.allow_tf32

    def candidate():
        torch.backends.cuda.matmul.allow_tf32 = not before
        return torch.empty(1)

    _, err = guarded(candidate)
    assert err is not None and err.check == _checks.PRECISION_STATE
    assert err.evidence["flag"] == "cuda.matmul.allow_tf32"
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_grad_mode_flip_is_global_state():
    def candidate():
        torch.set_grad_enabled(True)
        return torch.empty(1)

    _, err = guarded(candidate)
    assert err is not None and err.check == _checks.GLOBAL_STATE


@pytest.mark.parametrize(
    "name",
    ["disable_dispatch", "pop_mode"],
)
def test_disabling_the_dispatch_layer_is_seen_by_the_trace(name):
    from torch.utils._python_dispatch import _pop_mode_temporarily

    def candidate():
        ctx = torch._C._DisableTorchDispatch() if name == "disable_dispatch" else _pop_mode_temporarily()
        with ctx:
            return torch.sigmoid(X)

    _, err = guarded(candidate)
    assert err is not None and err.check == _checks.GUARD_BYPASS, err


def test_disabling_torch_function_to_fake_compiled_origin():
    def candidate():
        with torch._C.DisableTorchFunction():
            return torch.mm(X, W)  # cuda_agent allows GEMM only from compiled code

    _, err = guarded(candidate, "cuda_agent")
    assert err is not None and err.check == _checks.GUARD_BYPASS


def test_removing_the_modes_for_good_is_seen():
    from torch.utils._python_dispatch import _pop_mode

    def candidate():
        _pop_mode()
        return torch.empty(1)

    _, err = guarded(candidate)
    assert err is not None and err.check == _checks.GUARD_BYPASS


def test_custom_op_internals_are_judged():
    @torch.library.custom_op("guard_test::hidden_relu", mutates_args=())
    def hidden_relu(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

    _, err = guarded(lambda: hidden_relu(X))
    assert err is not None and err.check == _checks.FORBIDDEN_OP
    assert err.evidence["custom_op"].startswith("guard_test::hidden_relu")

    @torch.library.custom_op("guard_test::fresh", mutates_args=())
    def fresh(x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape)

    _, err = guarded(lambda: fresh(X))
    assert err is None, err


def test_forwarding_composites_that_do_nothing_are_fine():
    _, err = guarded(lambda: F.dropout(X, p=0.5, training=False))
    assert err is None, err


def test_host_escapes():
    for fn in (
        lambda: X.numpy(),
        lambda: X.tolist(),
        lambda: np.asarray(X),
        lambda: f"{X}",
        lambda: X[0, 0].item(),
    ):
        _, err = guarded(fn)
        assert err is not None and err.check == _checks.HOST_ESCAPE, err


def test_cuda_agent_gemm_only_from_compiled_code():
    _, err = guarded(lambda: torch.mm(X, W), "cuda_agent")
    assert err is not None and err.check == _checks.FORBIDDEN_OP and err.evidence["origin"] == "python"
    rules = get_policy("cuda_agent")
    assert rules.decide("aten", "mm", "compiled") == "allowed"
    assert rules.decide("aten", "relu", "compiled") == "forbidden"


def test_kernelbench_allows_glue_from_python_and_compiled_code():
    """PyTorch glue is allowed under kernelbench whoever calls it (tests/guard/test_kernelbench_policy.py has
    the operators one by one)."""
    _, err = guarded(lambda: torch.relu(F.linear(X, LIN.weight, LIN.bias)), "kernelbench", os_threads=False)
    assert err is None, err
    rules = get_policy("kernelbench")
    assert rules.decide("aten", "relu", "compiled") == rules.decide("aten", "relu", "python") == "allowed"


def test_policy_lookup():
    """One policy object per name, shared by the judge's rules and the guard (no copy to keep in step)."""
    strict = POLICIES["strict"]
    assert get_policy("strict") is strict and get_policy(strict) is strict
    assert strict.decide("aten", "relu", "python") == "forbidden"
    assert POLICIES["kernelbench"].decide("aten", "mm", "python") == "allowed"
    known = "known: \\['cuda_agent', 'kernelbench', 'strict'\\]"
    with pytest.raises(ValueError, match="unknown policy 'lenient'; " + known):
        get_policy("lenient")
    with pytest.raises(ValueError, match="a policy is a name or a Policy"):
        get_policy(3)


def test_guard_is_single_use():
    from kernels_env.guard import Guard

    g = Guard("strict", census=False)
    with g:
        pass
    with pytest.raises(RuntimeError):
        g.__enter__()


def test_census_with_the_triton_interpreter():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    if torch.cuda.is_available():
        pytest.skip("interpreter census is the CPU path")

    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    def candidate():
        y = torch.empty_like(X)
        copy_kernel[(1,)](X, y, X.numel(), BLOCK=64)
        return y

    out, err = guarded(candidate, census=True)
    assert err is None, err
    assert torch.equal(out, X)
    _, err = guarded(lambda: torch.empty_like(X), census=True)
    assert err is not None and err.check == _checks.NO_CUSTOM_KERNEL


def test_protected_file_write_is_blocked(tmp_path):
    target = tmp_path / "judge.py"
    target.write_text("ORIGINAL = True\n")

    def candidate():
        with open(target, "a") as f:
            f.write("# edited\n")
        return torch.empty(1)

    _, err = guarded(candidate, protected_paths=[str(tmp_path)])
    assert err is not None and err.check == _checks.VERIFIER_WRITE
    assert target.read_text() == "ORIGINAL = True\n"
    elsewhere = os.path.join(tempfile.mkdtemp(), "scratch.txt")

    def writes_elsewhere():
        with open(elsewhere, "w") as f:
            f.write("scratch")
        return torch.empty(1)

    _, err = guarded(writes_elsewhere, protected_paths=[str(tmp_path)])
    assert err is None, err  # writing outside the protected paths is fine
    os.unlink(elsewhere)
