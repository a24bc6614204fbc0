import torch
import torch.nn as nn


class Model(nn.Module):
    """row softmax (KernelBench level-1 style)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


batch_size = 8192
dim = 4096


def get_inputs():
    return [torch.rand(batch_size, dim) * 8 - 4]


def get_init_inputs():
    return []
