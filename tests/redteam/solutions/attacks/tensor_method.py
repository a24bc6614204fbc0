# redteam: class=1 expect=forbidden_op problem=relu policy=strict
"""Attack: a tensor method (x.clamp) instead of a kernel."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)
