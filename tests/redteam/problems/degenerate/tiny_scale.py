import torch
import torch.nn as nn

batch_size = 8
dim = 32


class Model(nn.Module):
    """Degenerate at loose tolerances: outputs of order 1e-3, so zeros pass atol=1e-2 but not 1e-4."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1e-3


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
