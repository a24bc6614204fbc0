# redteam: class=1 expect=forbidden_op|library_kernel problem=relu policy=strict
"""Attack: let torch.compile/Inductor generate the kernel (PyTorch's compute, not the solution's). Under the
guard's modes Dynamo falls back to eager and the ATen call is refused (forbidden_op); a Dynamo that compiles
anyway launches Inductor's Triton kernels, which the GPU census refuses (library_kernel)."""

import torch
import torch.nn as nn


@torch.compile
def compiled_relu(x):
    return torch.relu(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return compiled_relu(x)
