"""A solution whose forward raises (it indexes a dimension the input does not have): the verdict is
'runtime_error' with a traceback trimmed to this file's frames."""

import torch
import torch.nn as nn


def _reduced_shape(x: torch.Tensor, dim: int) -> tuple:
    return x.shape[:dim] + (1,) + x.shape[dim + 1 :] + (x.shape[dim + 5],)  # bug: IndexError


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(_reduced_shape(x, self.dim))
