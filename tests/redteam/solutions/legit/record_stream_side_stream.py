# redteam: expect=accepted problem=relu policy=strict style=record-stream device=cuda
"""Legit: the kernel runs on a side stream that waits for the current one; record_stream tells the caching
allocator that the side stream uses the input and output blocks, and the current stream waits for the side
stream before forward returns (issue 12: such a solution was rejected as input_mutation; record_stream is
allocator bookkeeping, not a write)."""

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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.side is None:
            self.side = torch.cuda.Stream()
        y = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            x.record_stream(self.side)
            y.record_stream(self.side)
            relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        torch.cuda.current_stream().wait_stream(self.side)
        return y
