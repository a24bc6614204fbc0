# redteam: class=13 expect=launch_error problem=relu policy=strict device=cuda
"""Attack (memory race/out-of-bounds that "happens to pass"): the kernel writes the right answer and also
scribbles far past the output. The illegal address is sticky and surfaces at synchronisation."""

import cupy as cp
import torch
import torch.nn as nn

_SRC = r"""
extern "C" __global__ void relu_oob(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[i] = v > 0.f ? v : 0.f; }
  if (i == 0) { y[n + (1LL << 34)] = 1.f; }
}
"""
_relu = cp.RawKernel(_SRC, "relu_oob")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _relu(((n + 255) // 256,), (256,), (x.data_ptr(), y.data_ptr(), cp.int64(n)))
        return y
