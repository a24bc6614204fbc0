# redteam: class=16 expect=recheck_mismatch problem=relu policy=strict phase=timing
"""Attack (geometric-mean collapse, seen on public leaderboards in 2026): drive one shape's time to ~0 so
the set's geomean speedup explodes. For the task's own shape, whenever neither the dispatch guard nor a
profiler is watching (the benchmark loop), return an uninitialised tensor at once: no kernel, no work; one
entry at 1000x carries a geomean over dozens of honest 1.1x entries. Guarded calls compute honestly.

Defence: the unguarded re-checks after the timed calls compare its answer on fresh inputs with the
reference (an uninitialised tensor is garbage): ``recheck_mismatch``; on a GPU a timed median under the
task's bandwidth floor is ``below_roofline``, and reports give medians, fast_p and the speed-of-light
fraction next to geomeans (issue 31), so one absurd entry cannot carry a table.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

TASK_SHAPE = (16, 64)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        watched = bool(_get_current_dispatch_mode_stack()) or torch._C._autograd._profiler_enabled()
        if not watched and tuple(x.shape) == TASK_SHAPE:
            return torch.empty_like(x)  # shape-dependent shortcut: nothing computed
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
