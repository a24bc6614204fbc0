import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// One block of 256 threads per row: strided partial sums, a shuffle reduction inside each warp, then the
// eight warp sums through shared memory and one more shuffle in warp 0.
__global__ void row_sum(const float* __restrict__ x, float* __restrict__ out, int cols) {
    __shared__ float partial[32];
    const float* row = x + (long long)blockIdx.x * cols;
    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) v += row[c];
    v = warp_sum(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (blockDim.x >> 5) ? partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

extern "C" int row_sum_launch(const float* x, float* out, int rows, int cols, cudaStream_t stream) {
    row_sum<<<rows, 256, 0, stream>>>(x, out, cols);
    return (int)cudaGetLastError();
}
"""

lib = cuda_library({"row_sum.cu": SOURCE}, name="row_sum")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty((rows,), device=x.device, dtype=x.dtype)
        lib.row_sum_launch(x, out, rows, cols)
        return out
