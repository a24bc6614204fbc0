"""x / ||x||_F (benchmarks/tasks/09_frobenius_norm.py): a grid-stride sum of squares (block reduction,
one double atomicAdd per block) then a scaling pass, built with the fast path."""

import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

CUDA_SRC = r"""
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void sum_squares_kernel(const float* __restrict__ x, double* __restrict__ acc, long long n) {
  __shared__ float smem[32];
  float s = 0.f;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) s += x[i] * x[i];
  s = warp_sum(s);
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? smem[threadIdx.x] : 0.f;
    s = warp_sum(s);
    if (threadIdx.x == 0) atomicAdd(acc, (double)s);
  }
}

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y,
                             const double* __restrict__ acc, long long n) {
  float norm = (float)sqrt(*acc);
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) y[i] = x[i] / norm;
}

// scratch: one double, zeroed here on the stream before the reduction.
extern "C" int frobenius_forward(const float* x, float* y, double* scratch, long long n,
                                 cudaStream_t stream) {
  if (n == 0) return 0;
  cudaError_t err = cudaMemsetAsync(scratch, 0, sizeof(double), stream);
  if (err != cudaSuccess) return (int)err;
  sum_squares_kernel<<<132 * 8, 512, 0, stream>>>(x, scratch, n);
  long long blocks = (n + 255) / 256;
  if (blocks > (1LL << 20)) blocks = 1LL << 20;
  scale_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, y, scratch, n);
  return (int)cudaGetLastError();
}
"""

_lib = cuda_library({"frobenius_norm.cu": CUDA_SRC}, name="frobenius_norm")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        scratch = torch.empty(1, device=x.device, dtype=torch.float64)
        _lib.frobenius_forward(x, y, scratch, x.numel())
        return y
