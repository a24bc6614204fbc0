# redteam: class=1 expect=forbidden_op problem=linear_relu policy=kernelbench
"""Attack under kernelbench: the GEMM may stay in PyTorch, the elementwise ReLU may not."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(F.linear(x, self.linear.weight, self.linear.bias))
