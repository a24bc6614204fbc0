import torch
import torch.nn as nn

batch_size = 16
dim = 64


class Model(nn.Module):
    """x * scale + y with the scale as a constructor hyper-parameter."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * self.scale + y


def get_inputs():
    return [torch.rand(batch_size, dim), torch.rand(batch_size, dim)]


def get_init_inputs():
    return [2.0]
