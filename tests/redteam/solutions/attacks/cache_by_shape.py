# redteam: class=5 expect=mismatch problem=relu policy=strict
"""Attack: compute once per input shape and replay the cached result, launching a token kernel on every call
so the census is satisfied (fresh inputs per trial defeat it). Without the token launch the per-call kernel
census already rejects it (no_custom_kernel)."""

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
        self.cache = {}

    def forward(self, x):
        relu_kernel[(1,)](x, torch.empty_like(x), 1, BLOCK=256)
        key = tuple(x.shape)
        if key not in self.cache:
            self.cache[key] = triton_relu(x)
        return self.cache[key]
