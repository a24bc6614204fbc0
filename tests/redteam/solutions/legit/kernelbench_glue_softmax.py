# redteam: expect=accepted problem=softmax policy=kernelbench style=kernelbench-glue
"""Legit under kernelbench (KernelBench-style partial replacement): PyTorch glue computes the row maximum,
the shift, the row sums and the division; a Triton kernel computes the exponentials."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def exp_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.exp(tl.load(x_ptr + offs, mask=mask)), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shifted = (x - x.amax(dim=1, keepdim=True)).contiguous()  # glue: amax, sub
        e = torch.empty_like(shifted)
        exp_kernel[(triton.cdiv(e.numel(), 256),)](shifted, e, e.numel(), BLOCK=256)
        return e / e.sum(dim=1, keepdim=True)  # glue: sum, div
