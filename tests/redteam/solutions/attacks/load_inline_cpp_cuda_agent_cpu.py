# redteam: class=1 expect=forbidden_op problem=linear_relu policy=strict marks=slow
"""Attack under strict (CPU build, slow): torch::addmm from C++ (cuda_agent allows it, strict does not)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="redteam_cpp_addmm",
    cpp_sources=(
        "torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) "
        "{ return torch::addmm(b, x, w.t()).clamp_min_(0); }"
    ),
    functions=["linear_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.linear_relu(x, self.linear.weight, self.linear.bias)
