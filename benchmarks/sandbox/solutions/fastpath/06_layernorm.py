"""LayerNorm over the last dim (tasks/06_layernorm.py): one block per row, two-pass mean and
variance with warp-shuffle block reductions, affine from the module's own parameters; fast path."""

import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

CUDA_SRC = r"""
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float block_sum(float v, float* smem) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? smem[threadIdx.x] : 0.f;
  if (threadIdx.x < 32) v = warp_sum(v);
  if (threadIdx.x == 0) smem[0] = v;
  __syncthreads();
  float r = smem[0];
  __syncthreads();
  return r;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int cols, float eps) {
  __shared__ float smem[32];
  const float* xr = x + (long long)blockIdx.x * cols;
  float* yr = y + (long long)blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  float mean = block_sum(s, smem) / cols;
  float q = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = xr[c] - mean;
    q += d * d;
  }
  float rstd = 1.f / sqrtf(block_sum(q, smem) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
}

extern "C" int layernorm_forward(const float* x, const float* w, const float* b, float* y, int rows, int cols,
                                 float eps, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return 0;
  layernorm_kernel<<<rows, 512, 0, stream>>>(x, w, b, y, cols, eps);
  return (int)cudaGetLastError();
}
"""

_lib = cuda_library({"layernorm.cu": CUDA_SRC}, name="layernorm")


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=(features,))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = self.ln.normalized_shape[0]
        w, b = self.ln.weight.contiguous(), self.ln.bias.contiguous()
        _lib.layernorm_forward(x, w, b, y, x.numel() // cols, cols, self.ln.eps)
        return y
