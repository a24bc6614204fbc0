import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, then an extra bias, then ReLU (a level-2 style fusion)."""

    def __init__(self, in_features: int, out_features: int, bias_shape: tuple):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = x + self.bias
        return torch.relu(x)


batch_size = 128
in_features = 256
out_features = 256
bias_shape = (out_features,)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
