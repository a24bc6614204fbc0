"""An agent workspace (CUDA Agent's layout): this file plus kernels/*.cu, built into one library by the
sandbox's fast path. Sums a (B, D1, D2) tensor over dim 1 with one thread per output element (coalesced
reads along D2)."""

import os

import torch
import torch.nn as nn

from kernels_env.fastpath import workspace_library

lib = workspace_library(os.path.dirname(os.path.abspath(__file__)), name="sum_dim1")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        if dim != 1:
            raise ValueError("this kernel reduces dim 1 only")
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, D1, D2 = x.shape
        out = torch.empty((B, 1, D2), device=x.device, dtype=x.dtype)
        lib.sum_dim1_launch(x, out, B, D1, D2)
        return out
