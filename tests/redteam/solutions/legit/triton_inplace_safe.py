# redteam: expect=accepted problem=scale_add policy=strict style=in-place-safe
"""Legit, in-place-safe writes: kernel 1 writes x*scale into a fresh output, kernel 2 adds y into that output
in place. Only the candidate's own buffer is written; the inputs are read-only. The scale comes from the
constructor (the init_args family changes it)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


@triton.jit
def add_inplace_kernel(out_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, 512),)
        scale_kernel[grid](x, out, self.scale, n, BLOCK=512)
        add_inplace_kernel[grid](out, y, n, BLOCK=512)
        return out
