"""Honest solutions the real judge used to reject (issue 31), judged through the CPU sandbox: one judge call
per mechanism, on problems and solutions written here. The hacks the same checks catch are in tests/guard and
tests/redteam; in-process unit tests of each mechanism: tests/guard/test_honest_solutions.py."""

from __future__ import annotations

from kernels_env.rules.config import JudgeConfig

from .conftest import FAST, relu_with, src

BATCHNORM_TRAIN = src(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.bn = nn.BatchNorm1d(channels)

        def forward(self, x):
            return self.bn(x)

    def get_inputs():
        return [torch.rand(32, 16)]

    def get_init_inputs():
        return [16]
    """
)

BATCHNORM_TRITON = src(
    """
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    @triton.jit
    def affine_norm(x_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, y_ptr, n, C: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        c = offs % C
        x = tl.load(x_ptr + offs, mask=mask)
        y = (x - tl.load(mean_ptr + c, mask=mask)) * tl.load(rstd_ptr + c, mask=mask)
        y = y * tl.load(w_ptr + c, mask=mask) + tl.load(b_ptr + c, mask=mask)
        tl.store(y_ptr + offs, y, mask=mask)

    class ModelNew(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.bn = nn.BatchNorm1d(channels)  # its parameters and running stats; forward is the kernel

        def forward(self, x):
            bn = self.bn
            mean, var = x.mean(0), x.var(0, unbiased=False)  # batch statistics: PyTorch glue
            if self.training:
                m = bn.momentum
                bn.running_mean.mul_(1 - m).add_(m * mean)
                bn.running_var.mul_(1 - m).add_(m * x.var(0, unbiased=True))
            rstd = torch.rsqrt(var + bn.eps)
            x = x.contiguous()
            y = torch.empty_like(x)
            affine_norm[(triton.cdiv(x.numel(), 256),)](
                x, mean, rstd, bn.weight, bn.bias, y, x.numel(), C=x.shape[1], BLOCK=256
            )
            return y
    """
)


def test_train_mode_batchnorm_survives_the_nan_family(client):
    """Mechanism 4: the nan_inf family used to leave the reference's running stats NaN, and the next
    guarded call reported the candidate for them (NaN != NaN): ``reference_tampered``."""
    judge = JudgeConfig(
        policy="kernelbench", num_trials=1, families=["nan_inf", "zeros"], time_candidate=False
    )
    res = client.evaluate(BATCHNORM_TRAIN, BATCHNORM_TRITON, judge=judge)
    assert res["judge"]["mode"] == "train"
    assert res["status"] == "correct", (res["check"], res["error"])
    assert res["correctness"]["families"]["zeros"]["status"] == "pass"


STRIDED_VIEW = src(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)[:, ::2]  # every other column: a gapped strided view

    def get_inputs():
        return [torch.rand(16, 64) * 2 - 1]

    def get_init_inputs():
        return []
    """
)


def test_an_output_in_the_references_own_gapped_layout_is_accepted(client):
    """Mechanism 3: the candidate answers in exactly the reference's layout (a strided view with gaps);
    ``output_strides`` used to refuse it (and would have refused the reference's own output)."""
    solution = relu_with("out = relu(x)\nreturn out[:, ::2]")
    res = client.evaluate(STRIDED_VIEW, solution, judge=FAST)
    assert res["status"] == "correct", (res["check"], res["error"])


GLOBAL_SCALE = src(
    """
    import torch
    import torch.nn as nn

    SCALE = 2.0

    class Model(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale  # stored, never read: forward reads the module's SCALE

        def forward(self, x):
            return torch.relu(x) * SCALE

    def get_inputs():
        return [torch.rand(16, 64) * 2 - 1]

    def get_init_inputs():
        return [SCALE]
    """
)

SCALED_RELU = src(
    """
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    @triton.jit
    def scaled_relu(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0) * scale, mask=mask)

    class ModelNew(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale  # honours its argument

        def forward(self, x):
            y = torch.empty_like(x)
            scaled_relu[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), self.scale, BLOCK=256)
            return y
    """
)


def test_init_args_is_skipped_for_a_reference_that_ignores_its_arguments(client):
    """Mechanism 5: a reference whose forward reads a module global instead of its constructor argument; a
    candidate that honours the argument used to fail the fatal ``init_args`` family."""
    judge = JudgeConfig(num_trials=1, families=["init_args"], time_candidate=False)
    res = client.evaluate(GLOBAL_SCALE, SCALED_RELU, judge=judge)
    assert res["status"] == "correct", (res["check"], res["error"])
    family = res["correctness"]["families"]["init_args"]
    assert family["status"] == "skipped" and "does not change" in family["reason"], family
