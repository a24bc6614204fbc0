import torch
import torch.nn as nn


class Model(nn.Module):
    """Standard 2D convolution with a square kernel (no padding, stride 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
height = 256
width = 256


def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
