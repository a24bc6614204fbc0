import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>
#include <mma.h>
using namespace nvcuda;

// One warp per 16x16 tile of C on the tensor cores: TF32 inputs (fp32 storage, 10-bit mantissa), fp32
// accumulation, m16n16k8 fragments. Tiles are staged zero-padded in shared memory, so any M, N, K works.
__global__ void wmma_tf32_matmul(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(32) float As[16 * 8];
    __shared__ __align__(32) float Bs[8 * 16];
    __shared__ __align__(32) float Cs[16 * 16];
    const int tm = blockIdx.y * 16, tn = blockIdx.x * 16, lane = threadIdx.x;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k0 = 0; k0 < K; k0 += 8) {
        for (int i = lane; i < 128; i += 32) {
            int ar = tm + i / 8, ac = k0 + i % 8;
            As[i] = (ar < M && ac < K) ? A[(long long)ar * K + ac] : 0.0f;
            int br = k0 + i / 16, bc = tn + i % 16;
            Bs[i] = (br < K && bc < N) ? B[(long long)br * N + bc] : 0.0f;
        }
        __syncwarp();
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
        wmma::load_matrix_sync(a, As, 8);
        wmma::load_matrix_sync(b, Bs, 16);
        for (int t = 0; t < a.num_elements; ++t) a.x[t] = wmma::__float_to_tf32(a.x[t]);
        for (int t = 0; t < b.num_elements; ++t) b.x[t] = wmma::__float_to_tf32(b.x[t]);
        wmma::mma_sync(acc, a, b, acc);
        __syncwarp();
    }
    wmma::store_matrix_sync(Cs, acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int i = lane; i < 256; i += 32) {
        int r = tm + i / 16, c = tn + i % 16;
        if (r < M && c < N) C[(long long)r * N + c] = Cs[i];
    }
}

extern "C" int wmma_matmul_launch(const float* A, const float* B, float* C, int M, int N, int K,
                                  cudaStream_t stream) {
    dim3 blocks((N + 15) / 16, (M + 15) / 16);
    wmma_tf32_matmul<<<blocks, 32, 0, stream>>>(A, B, C, M, N, K);
    return (int)cudaGetLastError();
}
"""

lib = cuda_library({"wmma_matmul.cu": SOURCE}, name="wmma_tf32_matmul")


# Like cuda_smem_tiled_matmul's wrapper on purpose: each example is one self-contained file the agent reads.
class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty((m, n), device=a.device, dtype=a.dtype)
        lib.wmma_matmul_launch(a, b, c, m, n, k)
        return c
