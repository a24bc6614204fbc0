import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(100, 70), torch.randn(70, 90)]


def get_init_inputs():
    return []
