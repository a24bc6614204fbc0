"""Sum over dim 1 with keepdim (examples/problems/5_sum_reduction.py): 32 output columns per block, 8 row
slices per column reduced in shared memory (coalesced along the last dim); fast path."""

import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

CUDA_SRC = r"""
#include <cuda_runtime.h>

// x: [outer, rows, inner] -> y: [outer, 1, inner], summing over rows.
__global__ void sum_dim1_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int inner) {
  __shared__ float part[8][33];
  int col = blockIdx.x * 32 + threadIdx.x;
  const float* xo = x + (long long)blockIdx.y * rows * inner;
  float s = 0.f;
  if (col < inner) {
    for (int r = threadIdx.y; r < rows; r += 8) s += xo[(long long)r * inner + col];
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < inner) {
    float t = 0.f;
    for (int k = 0; k < 8; ++k) t += part[k][threadIdx.x];
    y[(long long)blockIdx.y * inner + col] = t;
  }
}

extern "C" int sum_dim1_forward(const float* x, float* y, int outer, int rows, int inner,
                                cudaStream_t stream) {
  if (outer == 0 || inner == 0) return 0;
  dim3 grid((inner + 31) / 32, outer);
  sum_dim1_kernel<<<grid, dim3(32, 8), 0, stream>>>(x, y, rows, inner);
  return (int)cudaGetLastError();
}
"""

_lib = cuda_library({"sum_reduction.cu": CUDA_SRC}, name="sum_reduction")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        if dim != 1:
            raise ValueError("this kernel reduces dim 1 of a 3-D tensor")
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        outer, rows, inner = x.shape
        y = torch.empty(outer, 1, inner, device=x.device, dtype=x.dtype)
        _lib.sum_dim1_forward(x, y, outer, rows, inner)
        return y
