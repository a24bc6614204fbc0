# redteam: expect=accepted problem=rowsum policy=strict style=zeros-accumulator
"""Legit: torch.zeros accumulator (allocation with defined contents) and atomic adds of per-block partial
sums; float atomics reorder additions, so repeats agree within tolerance, not bitwise."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rowsum_kernel(x_ptr, out_ptr, R, D, stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < R) & (cols[None, :] < D)
    x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(out_ptr + rows, tl.sum(x, axis=1), mask=rows < R)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.zeros(rows, dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(rows, 8), triton.cdiv(cols, 32))
        rowsum_kernel[grid](x, out, rows, cols, x.stride(0), ROWS=8, BLOCK=32)
        return out
