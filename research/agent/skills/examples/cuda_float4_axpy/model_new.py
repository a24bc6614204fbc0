import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>
#include <stdint.h>

// 16-byte loads and stores (float4) for the aligned body, a scalar loop for the tail: a quarter of the load
// instructions of the scalar kernel.
__global__ void axpy4(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out,
                      long long n, int vec_ok) {
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long n4 = vec_ok ? n / 4 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* o4 = reinterpret_cast<float4*>(out);
    for (long long i = tid; i < n4; i += stride) {
        float4 a = x4[i], b = y4[i];
        o4[i] = make_float4(2.0f * a.x + b.x, 2.0f * a.y + b.y, 2.0f * a.z + b.z, 2.0f * a.w + b.w);
    }
    for (long long i = n4 * 4 + tid; i < n; i += stride) out[i] = 2.0f * x[i] + y[i];
}

extern "C" int axpy_launch(const float* x, const float* y, float* out, long long n, cudaStream_t stream) {
    int vec_ok = ((((uintptr_t)x) | ((uintptr_t)y) | ((uintptr_t)out)) % 16) == 0;
    const int threads = 256;
    long long blocks = (n / 4 + threads - 1) / threads;
    if (blocks > 1056) blocks = 1056;
    if (blocks < 1) blocks = 1;
    axpy4<<<(unsigned)blocks, threads, 0, stream>>>(x, y, out, n, vec_ok);
    return (int)cudaGetLastError();
}
"""

lib = cuda_library({"axpy.cu": SOURCE}, name="axpy4")


class ModelNew(nn.Module):
    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        lib.axpy_launch(x, y, out, x.numel())
        return out
