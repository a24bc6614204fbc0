import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>
#include <math.h>

// bias add, exact (erf) GELU and the scale in one pass: eager PyTorch runs three kernels and moves the
// tensor through global memory three times.
__global__ void bias_gelu_scale(const float* __restrict__ x, const float* __restrict__ bias,
                                float* __restrict__ y, long long n, int dim, float scale) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] + bias[i % dim];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) * scale;
    }
}

extern "C" int bias_gelu_launch(const float* x, const float* bias, float* y, long long n, int dim,
                                float scale, cudaStream_t stream) {
    const int threads = 256;
    unsigned blocks = (unsigned)((n + threads - 1) / threads);
    bias_gelu_scale<<<blocks, threads, 0, stream>>>(x, bias, y, n, dim, scale);
    return (int)cudaGetLastError();
}
"""

lib = cuda_library({"bias_gelu.cu": SOURCE}, name="bias_gelu")


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.bias_gelu_launch(x, self.bias, y, x.numel(), x.shape[-1], 1.5)
        return y
