# redteam: class=5 expect=recheck_mismatch problem=relu policy=kernelbench phase=timing
"""Attack ("batch-and-skip", GPU MODE leaderboards 2026): do all of the work in the first call on an input
buffer and little in the rest. The first call on a buffer computes the whole batch and keeps it; later calls
on the same buffer (same data pointer, same version counter) recompute only the first row of the batch, the
part a spot check would look at, and copy the rest from the kept answer (glue, allowed under kernelbench).
Fresh tensors in every trial and family make every guarded call a first call, so correctness holds; in the
benchmark loop, which rotates a few input sets, every timed call after the first per set skips the batch.

Defence: the re-check after timing calls the candidate on a timed input set refilled in place with new
values while pointer, shape and version counter stay the same (the judge writes through ``.data``): the
skipped rows are stale, ``recheck_mismatch``. With a refill that bumped the version counter this was
accepted.
"""

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
        self.done = {}  # data pointer -> (input held, version, whole answer)

    def forward(self, x):
        y = torch.empty_like(x)
        seen = self.done.get(x.data_ptr())
        if seen is not None and seen[0] is x and seen[1] == x._version:
            y.copy_(seen[2])  # the rest of the batch: kept from the first call (glue)
            row = x.shape[-1]
            relu_kernel[(1,)](x, y, row, BLOCK=triton.next_power_of_2(row))  # row 0 only
            return y
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        self.done[x.data_ptr()] = (x, x._version, y + 0.0)
        return y
