"""The wrong answer several attacks compute (a helper module of their workspaces): a custom kernel,
so the verdict is about the answer, whose result is half the ReLU of non-negative inputs."""

import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


def wrong(x):
    y = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), 0.5, BLOCK=256)
    return y
