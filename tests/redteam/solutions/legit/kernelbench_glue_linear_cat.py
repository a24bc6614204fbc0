# redteam: expect=accepted problem=linear_relu policy=kernelbench style=kernelbench-glue-cat
"""Legit under kernelbench: the GEMM in PyTorch (F.linear), the ReLU in a Triton kernel applied to each half
of the features, the halves joined with torch.cat; a no-op .to() and .contiguous() on the way (issue 12: a
no-op .to() was reported as guard_bypass)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


def triton_relu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float32)  # a no-op: the input is float32 already
        h = F.linear(x, self.linear.weight, self.linear.bias)
        left, right = h.chunk(2, dim=1)
        return torch.cat([triton_relu(left), triton_relu(right)], dim=1)
