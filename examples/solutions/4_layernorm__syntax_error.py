"""A solution with a syntax error (missing colon): the verdict is 'compile_error' naming line and column."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor
        return self.ln(x)
