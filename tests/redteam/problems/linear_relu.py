import torch
import torch.nn as nn

batch_size = 8
in_features = 32
out_features = 16


class Model(nn.Module):
    """Linear followed by ReLU (KernelBench level-2 style: a weight the candidate must use)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
