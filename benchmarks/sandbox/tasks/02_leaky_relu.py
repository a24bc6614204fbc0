import torch
import torch.nn as nn


class Model(nn.Module):
    """Simple model that performs a LeakyReLU activation."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 4096
dim = 8192


def get_inputs():
    x = torch.rand(batch_size, dim) * 2 - 1
    return [x]


def get_init_inputs():
    return [0.05]
