# A KernelBench-format problem of its own example (self-contained: the skill tool serves each alone).
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(48, 40), torch.randn(40, 56)]


def get_init_inputs():
    return []
