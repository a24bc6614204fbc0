# redteam: class=8 expect=output_type problem=relu policy=strict
"""Attack: return a tensor subclass whose comparisons always succeed."""

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


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def forward(self, x):
        return triton_relu(x).as_subclass(Agreeable)
