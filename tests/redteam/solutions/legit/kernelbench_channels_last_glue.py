# redteam: expect=accepted problem=relu4d policy=kernelbench style=kernelbench-channels-last
"""Legit under kernelbench (a common public pattern): PyTorch converts the input to channels-last (glue: a
copy), a flat Triton kernel applies the ReLU to that buffer, and the output stays channels-last."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_flat_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous(memory_format=torch.channels_last)
        y = torch.empty_like(xc)  # preserves channels-last: same strides as xc, so flat offsets match
        relu_flat_kernel[(triton.cdiv(xc.numel(), 256),)](xc, y, xc.numel(), BLOCK=256)
        return y
