# redteam: class=13 expect=poisoned_output problem=relu policy=strict
"""Attack (uninitialised memory): a scratch buffer is read before it is written; with a fresh allocator it
often holds zeros and the result looks right."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_plus_scratch(x_ptr, s_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) + s, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty_like(x)
        y = torch.empty_like(x)
        relu_plus_scratch[(triton.cdiv(x.numel(), 256),)](x, scratch, y, x.numel(), BLOCK=256)
        return y
