"""A solution that forgets the padding: its output is 62x62 instead of 64x64, so the verdict is 'incorrect'
with a shape mismatch."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.conv2d(x, self.conv.weight, self.conv.bias)  # no padding
