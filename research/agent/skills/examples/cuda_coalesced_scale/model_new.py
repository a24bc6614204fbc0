import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>

// Grid-stride loop: thread i of the grid touches i, i + stride, ... so a warp always reads 32 consecutive
// floats (one 128-byte transaction) and any size works with a fixed, SM-filling grid.
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = x[i] * alpha;
}

extern "C" int scale_launch(const float* x, float* y, float alpha, long long n, cudaStream_t stream) {
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 132 * 8) blocks = 132 * 8;
    if (blocks < 1) blocks = 1;
    scale_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, alpha, n);
    return (int)cudaGetLastError();
}
"""

lib = cuda_library({"scale.cu": SOURCE}, name="scale")


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.scale_launch(x, y, float(self.alpha), x.numel())
        return y
