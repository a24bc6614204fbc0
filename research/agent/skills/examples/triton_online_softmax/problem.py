# A KernelBench-format problem of its own example (self-contained: the skill tool serves each alone).
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(16, 300) * 4]


def get_init_inputs():
    return []
