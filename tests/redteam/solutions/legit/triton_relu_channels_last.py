# redteam: expect=accepted problem=relu4d policy=strict style=channels-last
"""Legit: the kernel writes its answer in channels-last order (NHWC in memory) from an input of any layout.
Dense and non-overlapping, values right: accepted under every policy, with a note that the strides differ
from the reference's (issue 12: three public solutions were rejected as output_strides for this)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu4d_kernel(x_ptr, y_ptr, C, H, W, sx0, sx1, sx2, sx3, sy0, sy1, sy2, sy3, total, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < total
    w = i % W
    h = (i // W) % H
    c = (i // (W * H)) % C
    n = i // (W * H * C)
    x = tl.load(x_ptr + n * sx0 + c * sx1 + h * sx2 + w * sx3, mask=mask)
    y = tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + n * sy0 + c * sy1 + h * sy2 + w * sy3, y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x, memory_format=torch.channels_last)
        _, C, H, W = x.shape
        total = x.numel()
        relu4d_kernel[(triton.cdiv(total, 256),)](x, y, C, H, W, *x.stride(), *y.stride(), total, BLOCK=256)
        return y
