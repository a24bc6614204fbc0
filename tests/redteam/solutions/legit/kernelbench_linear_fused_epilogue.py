# redteam: expect=accepted problem=linear_relu_large policy=kernelbench style=kb-gemm-epilogue device=cuda
"""Legit under kernelbench (issue 31): the GEMM stays in PyTorch (cuBLAS through F.linear, no bias) and one
Triton kernel fuses the whole epilogue (bias, ReLU, scale) over the output. The GEMM takes over 99% of the
device time, so the custom kernel's share is far below 2%; it still reads and writes every output element."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_relu_scale_kernel(y_ptr, b_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + offs % cols, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(y, 0.0, propagate_nan=tl.PropagateNan.ALL) * 2.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)  # same parameters: the seed replay syncs them

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.fc.weight)  # PyTorch glue: the GEMM, its bias left to the epilogue
        out = torch.empty_like(y)
        n = y.numel()
        bias_relu_scale_kernel[(triton.cdiv(n, 1024),)](y, self.fc.bias, out, n, y.shape[1], BLOCK=1024)
        return out
