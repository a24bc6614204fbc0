# redteam: class=1 expect=forbidden_op problem=relu policy=strict marks=slow
"""Attack (CPU build, slow: compiles a C++ extension): torch::relu inside C++ code, seen at dispatch."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="redteam_cpp_torch_relu",
    cpp_sources="torch::Tensor torch_relu(torch::Tensor x) { return torch::relu(x); }",
    functions=["torch_relu"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.torch_relu(x)
