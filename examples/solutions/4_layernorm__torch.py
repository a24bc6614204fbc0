"""Plain PyTorch (no custom kernel): LayerNorm written out from its definition. The sandbox enforces the
strict policy (no PyTorch compute inside ModelNew): the verdict is 'rejected' with check 'forbidden_op', and
the evidence names the first PyTorch operator (aten.mean) and this file's line."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return (x - mean) * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
