"""Where float32 itself cannot meet the tolerance on an adversarial family's inputs, the judge compares again
with the tolerance widened by the float32 reference's own error against float64
(kernels_env/judge/check/conditioning.py). Found on the H200: the ``large`` family failed correct Triton plans
that were closer to the float64 answer than the reference was."""

from __future__ import annotations

import math

import torch

from kernels_env.judge.check import conditioning
from kernels_env.judge.run.families import FAIL, PASS
from kernels_env.judge.run.families import judge as judge_family
from kernels_env.rules.config import JudgeConfig

from .conftest import src

TOL = {"float32": [1e-4, 1e-4], "float64": [1e-4, 1e-4]}


def _sin3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """sin(3x) in float32 as torch computes it, and the float64 answer on the same float32 inputs."""
    return torch.sin(x * 3.0), torch.sin(x.double() * 3.0)


def test_reference_error_is_the_largest_finite_difference():
    e = torch.tensor([1.0, float("nan"), float("inf"), 2.0])
    t = torch.tensor([1.5, 0.0, 7.0, 2.25], dtype=torch.float64)
    assert conditioning.reference_error(e, t) == 0.5  # nan and inf positions left out
    assert conditioning.reference_error((e, torch.arange(3)), (t, torch.arange(3))) == 0.5
    for bad in ((t, t), t[:3]):
        try:
            conditioning.reference_error(e, bad)
        except ValueError as exc:
            assert "float64 reference" in str(exc)
        else:
            raise AssertionError(f"{bad!r} pairs up with one tensor of 4")
    assert conditioning.widened(TOL, 0.25) == {"float32": [0.5001, 1e-4], "float64": [0.5001, 1e-4]}
    inputs = [torch.ones(2), 3, {"k": torch.zeros(1, dtype=torch.float16)}, torch.arange(2)]
    promoted = conditioning.promote(inputs)
    assert promoted[0].dtype == torch.float64 and promoted[2]["k"].dtype == torch.float64
    assert promoted[1] == 3 and promoted[3].dtype == torch.int64


def test_a_candidate_closer_to_float64_than_the_reference_passes_a_large_family():
    torch.manual_seed(0)
    x = torch.randn(64, 256) * 1e4  # the `large` family's inputs
    expected, exact = _sin3(x)
    got = exact.float()  # the float64 answer, rounded once: more accurate than the reference
    err = conditioning.reference_error(expected, exact)
    # x * 3.0 rounds to float32 within half a rounding step of the largest |3x| (~1.3e5: 2**-7): far above
    # the 1e-4 tolerance, and a bound on E since |sin'| <= 1 (sin itself adds ~1e-7)
    half_step = 2.0 ** (math.floor(math.log2(float((x * 3.0).abs().max()))) - 24)
    assert 1e-4 < err <= half_step + 1e-6
    failed = judge_family("large", True, 1, expected, got, TOL)  # no float64 reference: as before
    assert failed["status"] == FAIL and failed["reference_fp32_error"] is None
    passed = judge_family("large", True, 1, expected, got, TOL, run64=lambda: exact)
    assert passed["status"] == PASS and passed["reference_fp32_error"] == err, passed
    assert passed["reason"] == (
        f"within atol + 2 x the float32 reference's own error against float64 here ({err:.3g})"
    )
    # Independently: the candidate (float64 rounded once, |sin| <= 1: within 2**-25) is within E of the
    # reference, well inside the 2E the widening grants.
    assert float((got.double() - expected.double()).abs().max()) <= err + 2.0**-25


def test_a_wrong_candidate_still_fails_with_the_reference_error_in_the_reason():
    torch.manual_seed(0)
    x = torch.randn(64, 256) * 1e4
    expected, exact = _sin3(x)
    # range reduction with 2*pi off by 5e-6: harmless for |3x| < 12, off by ~1e-2 at |3x| ~ 3e4
    wrong = torch.sin(torch.fmod(x.double() * 3.0, 6.28318)).float()
    res = judge_family("large", True, 1, expected, wrong, TOL, run64=lambda: exact)
    assert res["status"] == FAIL and res["reference_fp32_error"] > 0
    assert "values differ" in res["reason"]
    assert "; beyond atol + 2 x the float32 reference's own" in res["reason"]
    # NaN positions must still match, whatever the widening
    nan = exact.float().clone()
    nan[0, 0] = float("nan")
    assert judge_family("large", True, 1, expected, nan, TOL, run64=lambda: exact)["status"] == FAIL


def test_a_float64_reference_that_cannot_run_leaves_the_failure_standing():
    torch.manual_seed(0)
    expected, exact = _sin3(torch.randn(8, 8) * 1e4)

    def broken():
        raise RuntimeError("expected scalar type Double but found Float")

    res = judge_family("large", True, 1, expected, exact.float(), TOL, run64=broken)
    assert res["status"] == FAIL and "could not be computed (RuntimeError: expected scalar" in res["reason"]
    assert judge_family("zeros", True, 1, expected, expected.clone(), TOL, run64=broken)["status"] == PASS


SIN3_PROBLEM = src(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.sin(x * 3.0)

    def get_inputs():
        return [torch.randn(16, 256)]

    def get_init_inputs():
        return []
    """
)

SIN3_KERNEL = src(
    """
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    @triton.jit
    def _sin3(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float64)
        y = tl.sin(MAP)
        tl.store(y_ptr + offs, y.to(tl.float32), mask=offs < n)

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            x = x.contiguous()
            y = torch.empty_like(x)
            _sin3[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            return y
    """
)


def test_the_judge_passes_a_float64_kernel_on_large_inputs_and_fails_a_wrong_one(client):
    """End to end (CPU mode, Triton interpreter): a kernel computing sin(3x) in float64 is more accurate than
    the float32 reference; before the widening the fatal `large` family judged it incorrect."""
    judge = JudgeConfig(time_candidate=False, num_trials=2, families=["large", "zeros"])
    good = client.evaluate(SIN3_PROBLEM, SIN3_KERNEL.replace("MAP", "x * 3.0"), judge=judge)
    large = good["correctness"]["families"]["large"]
    assert good["status"] == "correct", good["error"]
    assert large["status"] == "pass" and large["reference_fp32_error"] > 1e-4, large
    assert good["correctness"]["families"]["zeros"]["reference_fp32_error"] is None  # passed outright
    wrong = client.evaluate(SIN3_PROBLEM, SIN3_KERNEL.replace("MAP", "x * 3.0 % 6.28318"), judge=judge)
    assert wrong["status"] == "incorrect" and wrong["correctness"]["failed_family"] == "large", wrong["error"]
    assert "own error against float64" in wrong["error"]
