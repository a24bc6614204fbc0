import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return x * self.alpha


def get_inputs():
    return [torch.randn(64, 1000)]


def get_init_inputs():
    return [0.5]
