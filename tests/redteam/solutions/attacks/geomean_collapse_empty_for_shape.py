# redteam: class=16 expect=poisoned_output problem=relu policy=strict
"""Attack (geometric-mean collapse, the blunt form): for the one shape the benchmark times, return an
uninitialised tensor of the right shape and launch nothing else but a token kernel on one element; every
other shape (the shape family's) is computed. With a fresh caching allocator the block often holds the
previous call's answer for the same inputs, so a harness that reuses inputs sees a right answer in ~0 time.

Defence: every ``empty*`` result inside forward is poisoned and freed blocks are poisoned before each
guarded call, so never-written elements are seen by their exact bits: ``poisoned_output``.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TASK_SHAPE = (16, 64)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = 1 if tuple(x.shape) == TASK_SHAPE else x.numel()
        relu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
