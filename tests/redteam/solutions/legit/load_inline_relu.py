# redteam: expect=accepted problem=relu policy=strict style=load_inline device=cuda
"""Legit: a load_inline CUDA kernel (KernelBench's usual style)."""

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
    def forward(self, x):
        return _ext.relu_cuda(x)
