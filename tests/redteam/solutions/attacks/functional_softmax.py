# redteam: class=1 expect=forbidden_op problem=softmax policy=strict
"""Attack: torch.nn.functional."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.softmax(x, dim=1)
