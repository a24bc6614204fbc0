# redteam: class=13 expect=nondeterministic problem=relu policy=strict
"""Attack (a race that sometimes loses): every other call the kernel covers only part of the output and the
rest keeps the zeros the buffer was initialised with."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


def triton_relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = torch.zeros_like(x)
        n = x.numel() if self.calls % 2 else x.numel() // 2
        relu_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
        return out
