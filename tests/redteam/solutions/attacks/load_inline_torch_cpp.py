# redteam: class=1 expect=forbidden_op problem=relu policy=strict device=cuda helpers=_inline.py
"""Attack: a load_inline extension whose C++ calls torch::relu: compute in compiled code still goes through
the dispatcher, where the guard sees it (origin: compiled)."""

import torch.nn as nn
from _inline import build  # a helper module of this workspace

_ext = build()


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.torch_relu(x)
