import torch
import torch.nn as nn

batch_size = 8
dim = 32


class Model(nn.Module):
    """Degenerate: ReLU of a negated non-negative input is identically zero (like KernelBench L2 #80/#83)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(-x)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
