"""RMSNorm over dim 1 (tasks/09_rms_norm.py): one thread per (batch, position) pair walks the
features (strided, coalesced across threads) twice: sum of squares, then scale; built with the fast path."""

import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

CUDA_SRC = r"""
#include <cuda_runtime.h>

// x, y: [outer, features, inner]; normalises every (outer, :, inner) column.
__global__ void rms_norm_kernel(const float* __restrict__ x, float* __restrict__ y, int features,
                                long long inner, long long columns, float eps) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long col = blockIdx.x * (long long)blockDim.x + threadIdx.x; col < columns; col += step) {
    long long o = col / inner, i = col % inner;
    const float* xc = x + o * features * inner + i;
    float* yc = y + o * features * inner + i;
    float s = 0.f;
    for (int f = 0; f < features; ++f) {
      float v = xc[f * inner];
      s += v * v;
    }
    float rms = sqrtf(s / features + eps);
    for (int f = 0; f < features; ++f) yc[f * inner] = xc[f * inner] / rms;
  }
}

extern "C" int rms_norm_forward(const float* x, float* y, int outer, int features, long long inner, float eps,
                                cudaStream_t stream) {
  long long columns = (long long)outer * inner;
  if (columns == 0 || features == 0) return 0;
  long long blocks = (columns + 255) / 256;
  if (blocks > (1LL << 20)) blocks = 1LL << 20;
  rms_norm_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, y, features, inner, columns, eps);
  return (int)cudaGetLastError();
}
"""

_lib = cuda_library({"rms_norm.cu": CUDA_SRC}, name="rms_norm")


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        inner = x[0, 0].numel()
        _lib.rms_norm_forward(x, y, x.shape[0], x.shape[1], inner, self.eps)
        return y
