# redteam: expect=accepted problem=relu policy=strict style=multi-stream device=cuda
"""Legit: half the rows on a side stream, half on the current stream, joined before returning (work on the
side stream is inside the timed region and the output is complete when the current stream is)."""

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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        xf, yf = x.view(-1), y.view(-1)
        n = x.numel()
        half = n // 2
        main = torch.cuda.current_stream()
        if self.side is None:
            self.side = torch.cuda.Stream()
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            relu_kernel[(triton.cdiv(n - half, 256),)](xf[half:], yf[half:], n - half, BLOCK=256)
        relu_kernel[(triton.cdiv(half, 256),)](xf, yf, half, BLOCK=256)
        main.wait_stream(self.side)
        y.record_stream(self.side)
        return y
