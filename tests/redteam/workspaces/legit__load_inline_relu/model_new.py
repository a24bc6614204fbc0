# redteam: expect=accepted problem=relu policy=strict style=load_inline device=cuda helpers=_inline.py
"""Legit: a load_inline CUDA kernel (KernelBench's usual style)."""

import torch.nn as nn
from _inline import build  # a helper module of this workspace

_ext = build()


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_cuda(x)
