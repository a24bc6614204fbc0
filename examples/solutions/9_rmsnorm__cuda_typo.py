"""A CUDA solution with a compile error (an undeclared identifier): the verdict is 'compile_error' with
nvcc's diagnostic (file, line, column) — in CPU mode too, since nvcc runs there."""

import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>

__global__ void rmsnorm_kernel(const float* x, float* out, int C, int HW, float eps) {
    int b = blockIdx.y;
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= HW) return;
    const float* xb = x + (long long)b * C * HW;
    float acc = 0.0f;
    for (int c = 0; c < C; ++c) { float v = xb[c * HW + p]; acc += v * v; }
    float inv = rsqrtf(acc / C + epsilon);   // typo: the parameter is called eps
    for (int c = 0; c < C; ++c) out[(long long)b * C * HW + c * HW + p] = xb[c * HW + p] * inv;
}

extern "C" int rmsnorm_launch(const float* x, float* out, int B, int C, int HW, float eps, cudaStream_t s) {
    dim3 grid((HW + 255) / 256, B);
    rmsnorm_kernel<<<grid, 256, 0, s>>>(x, out, C, HW, eps);
    return (int)cudaGetLastError();
}
"""

lib = cuda_library({"rmsnorm.cu": SOURCE}, name="rmsnorm")


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, C, H, W = x.shape
        out = torch.empty_like(x)
        lib.rmsnorm_launch(x, out, B, C, H * W, self.eps)
        return out
