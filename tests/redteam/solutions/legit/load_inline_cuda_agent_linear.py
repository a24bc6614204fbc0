# redteam: expect=accepted problem=linear_relu policy=cuda_agent style=compiled-gemm device=cuda
"""Legit under cuda_agent: torch::addmm (cuBLAS) called from the extension's own C++ code, then a custom ReLU
kernel in place on that GEMM's output (CUDA Agent's SKILL.md allows cuBLAS GEMM from compiled code)."""

import importlib.util
import os

import torch.nn as nn

_spec = importlib.util.spec_from_file_location(
    "_inline_ext", os.path.join(os.path.dirname(__file__), "..", "_inline_ext.py")
)
_ext_src = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ext_src)
_ext = _ext_src.build()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.linear_relu_cuda_agent(x, self.linear.weight, self.linear.bias)
