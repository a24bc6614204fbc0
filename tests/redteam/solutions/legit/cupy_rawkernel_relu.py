# redteam: expect=accepted problem=relu policy=strict style=cupy device=cuda
"""Legit: a CuPy RawKernel launched on torch's current stream, writing a torch-allocated output."""

import cupy as cp
import torch
import torch.nn as nn

_SRC = r"""
extern "C" __global__ void relu(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[i] = (v > 0.f || v != v) ? v : 0.f; }
}
"""
_relu = cp.RawKernel(_SRC, "relu")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _relu(((n + 255) // 256,), (256,), (x.data_ptr(), y.data_ptr(), cp.int64(n)))
        return y
