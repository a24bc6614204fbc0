# redteam: expect=accepted problem=linear_relu policy=kernelbench style=allowed-library-call
"""Legit under the kernelbench policy: the GEMM stays in PyTorch (F.linear, on the fallback list) and a Triton
kernel applies the ReLU in place on that GEMM's own output buffer."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_inplace_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(y, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.linear.weight, self.linear.bias)
        n = y.numel()
        relu_inplace_kernel[(triton.cdiv(n, 256),)](y, n, BLOCK=256)
        return y
