# redteam: expect=accepted problem=relu policy=strict style=cpp-noop-to marks=slow
"""Legit (CPU build, slow: compiles a C++ extension): the extension's C++ normalises its argument with
.to(dtype) and .contiguous(), both no-ops for a float32 contiguous input (they return the tensor itself and
dispatch no copy); a Triton kernel does the ReLU. Issue 12: five public solutions whose C++ or Python calls
.to() were rejected as guard_bypass ("aten::to ran inside forward without passing the dispatch guard")."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="redteam_cpp_noop_to",
    cpp_sources=("torch::Tensor normalise(torch::Tensor x) { return x.to(torch::kFloat32).contiguous(); }"),
    functions=["normalise"],
    verbose=False,
)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _ext.normalise(x.to(torch.float32))
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
