"""ReLU as a CUDA kernel built with the sandbox's fast path (nvcc -> cached shared library -> ctypes; about a
second to build instead of ~50 s for torch's load_inline). In CPU mode it compiles (a real nvcc verdict) and
is reported 'not_run'."""

import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i], 0.0f);
}

extern "C" int relu_launch(const float* x, float* out, long long n, cudaStream_t stream) {
    const int threads = 256;
    const long long blocks = (n + threads - 1) / threads;
    relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, out, n);
    return (int)cudaGetLastError();
}
"""

lib = cuda_library({"relu.cu": SOURCE}, name="relu")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu_launch(x, out, x.numel())
        return out
