"""Max over dim 1 (tasks/08_max_reduction.py): one block per row, NaN-propagating warp-shuffle
block reduction, built with the fast path."""

import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <math_constants.h>

// NaN-propagating max, like torch.max.
__device__ __forceinline__ float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__global__ void max_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float smem[32];
  const float* xr = x + (long long)blockIdx.x * cols;
  float m = -CUDART_INF_F;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = nan_max(m, xr[c]);
  m = warp_max(m);
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < (blockDim.x >> 5) ? smem[threadIdx.x] : -CUDART_INF_F;
    m = warp_max(m);
    if (threadIdx.x == 0) y[blockIdx.x] = m;
  }
}

extern "C" int max_rows_forward(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (rows == 0) return 0;
  max_rows_kernel<<<rows, 512, 0, stream>>>(x, y, cols);
  return (int)cudaGetLastError();
}
"""

_lib = cuda_library({"max_reduction.cu": CUDA_SRC}, name="max_reduction")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        if dim not in (1, -1):
            raise ValueError("this kernel reduces the last dim of a 2-D tensor")
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        _lib.max_rows_forward(x, y, x.shape[0], x.shape[1])
        return y
