# redteam: expect=accepted problem=linear_relu policy=cuda_agent style=cpp-gemm device=cuda helpers=_inline.py
"""Legit under cuda_agent: torch::addmm (cuBLAS) called from the extension's own C++ code, then a custom ReLU
kernel in place on that GEMM's output (CUDA Agent's SKILL.md allows cuBLAS GEMM from compiled code)."""

import torch.nn as nn
from _inline import build  # a helper module of this workspace

_ext = build()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.linear_relu_cuda_agent(x, self.linear.weight, self.linear.bias)
