# redteam: class=1 expect=forbidden_op problem=relu policy=strict
"""Attack: let torch.compile/Inductor generate the kernel (PyTorch's compute, not the solution's)."""

import torch
import torch.nn as nn


@torch.compile
def compiled_relu(x):
    return torch.relu(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return compiled_relu(x)
