# redteam: class=5 expect=recheck_mismatch problem=relu policy=strict phase=timing
"""Attack (GPU MODE leaderboards; the FlashInfer kernel contest's output-cache loophole, 2026): memoise the
answer by input identity. The key is the input tensor object itself (held, so its id and data pointer are
never reused) and its autograd version counter (so an in-place write through PyTorch invalidates it). Every
correctness trial hands fresh tensors, so the trials compute honestly; the benchmark loop rotates a few
input sets, so every timed call after the first per set replays the answer with one copy kernel (the work
of a GEMM or a conv becomes one output-sized copy). The copy is a custom kernel, so the census of the timing
audit is satisfied.

Defence: the re-check after timing refills a timed input set in place *without* touching anything a cache
can key on (same object, data pointer, shape, strides and version counter: the judge writes through
``.data``), so the replayed answer is stale: ``recheck_mismatch``. Before that fix the refill went through
``copy_``, which bumps the version counter, and this attack was accepted with a fraudulent time.
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


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}  # id(x) -> (x, version, answer)

    def forward(self, x):
        y = torch.empty_like(x)
        grid = (triton.cdiv(x.numel(), 256),)
        hit = self.memo.get(id(x))
        if hit is not None and hit[0] is x and hit[1] == x._version:
            copy_kernel[grid](hit[2], y, x.numel(), BLOCK=256)  # replay: one copy, no compute
            return y
        relu_kernel[grid](x, y, x.numel(), BLOCK=256)
        self.memo[id(x)] = (x, x._version, _keep(y))
        return y


def _keep(y):
    kept = torch.empty_like(y)
    copy_kernel[(triton.cdiv(y.numel(), 256),)](y, kept, y.numel(), BLOCK=256)
    return kept
