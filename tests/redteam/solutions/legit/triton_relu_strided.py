# redteam: expect=accepted problem=relu policy=strict style=strided-2d families=noncontig
"""Legit: 2-D grid that reads through the input's strides and writes a contiguous output, so it is also
right on non-contiguous inputs (the opt-in noncontig family) without a torch copy."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2d_kernel(x_ptr, y_ptr, R, C, sxr, sxc, syr, syc, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    mask = (r[:, None] < R) & (c[None, :] < C)
    x = tl.load(x_ptr + r[:, None] * sxr + c[None, :] * sxc, mask=mask)
    y = tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + r[:, None] * syr + c[None, :] * syc, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        R, C = x.shape
        y = torch.empty((R, C), dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(R, 16), triton.cdiv(C, 32))
        relu2d_kernel[grid](x, y, R, C, x.stride(0), x.stride(1), y.stride(0), y.stride(1), BR=16, BC=32)
        return y
