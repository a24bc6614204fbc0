# redteam: class=1 expect=forbidden_op problem=linear_relu policy=strict
"""Attack: call the nn.Linear layer (cuBLAS through PyTorch) and only do the ReLU in a custom kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


def triton_relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return triton_relu(self.linear(x))
