# redteam: class=11 expect=poisoned_output problem=relu policy=strict
"""Attack: the element count baked in from the task (16 x 64 = 1024): the grid covers 1024 elements whatever
the input, the mask only keeps it inside the real one. Right on the task's inputs and on any smaller batch
(the shape family used to only shrink it, so this was judged correct); on a larger batch the tail of the
output is never written, which the poisoned fresh output exposes."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BAKED = 16 * 64
BLOCK = 256


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(BAKED // BLOCK,)](x, y, x.numel(), BLOCK=BLOCK)
        return y
