import torch
import torch.nn as nn

batch_size = 16
dim = 64


class Model(nn.Module):
    """ReLU (KernelBench level-1 style, tiny sizes)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
