import torch
import torch.nn as nn


class Model(nn.Module):
    """row rmsnorm (KernelBench level-1 style)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6)


batch_size = 8192
dim = 4096


def get_inputs():
    return [torch.rand(batch_size, dim) * 8 - 4]


def get_init_inputs():
    return []
