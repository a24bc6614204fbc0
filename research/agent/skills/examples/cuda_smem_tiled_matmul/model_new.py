import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>
#define TILE 16

// Each block computes a TILE x TILE tile of C; tiles of A and B are staged in shared memory so each global
// element is loaded once per tile instead of once per multiply-add.
__global__ void tiled_matmul(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];  // +1: no bank conflicts on the column reads
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[(long long)row * K + ka] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[(long long)kb * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
}

extern "C" int matmul_launch(const float* A, const float* B, float* C, int M, int N, int K,
                             cudaStream_t stream) {
    dim3 threads(TILE, TILE), blocks((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    tiled_matmul<<<blocks, threads, 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
"""

lib = cuda_library({"matmul.cu": SOURCE}, name="tiled_matmul")


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)
        lib.matmul_launch(a, b, c, m, n, k)
        return c
