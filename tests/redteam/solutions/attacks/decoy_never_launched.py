# redteam: class=3 expect=no_custom_kernel|output_aliases_input problem=relu policy=strict
"""Attack: a kernel is defined (and would compile) but never launched; inputs are non-negative, so returning
a view of the input happens to equal ReLU. Either check rejects it: on a GPU the output-alias check fires
before the kernel census (seen on the H200), on the CPU the census does."""

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
    def forward(self, x):
        return x.view(x.shape)
