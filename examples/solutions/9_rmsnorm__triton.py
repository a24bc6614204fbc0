"""RMSNorm over dim 1 of an (B, C, H, W) tensor in Triton: one program per (batch, block of pixels), looping
over the C channels twice (sum of squares, then scale)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, out_ptr, C, HW, eps, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < HW
    base = b * C * HW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(0, C):
        v = tl.load(x_ptr + base + c * HW + offs, mask=mask, other=0.0)
        acc += v * v
    inv = 1.0 / tl.sqrt(acc / C + eps)
    for c in range(0, C):
        v = tl.load(x_ptr + base + c * HW + offs, mask=mask, other=0.0)
        tl.store(out_ptr + base + c * HW + offs, v * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        out = torch.empty_like(x)
        rmsnorm_kernel[(B, triton.cdiv(H * W, 1024))](x, out, C, H * W, self.eps, BLOCK=1024)
        return out
