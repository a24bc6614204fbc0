import torch
import torch.nn as nn

from kernels_env.fastpath import cuda_library

SOURCE = r"""
#include <cuda_runtime.h>

__global__ void affine(const float* __restrict__ x, float* __restrict__ t, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = x[i] * 2.0f + 1.0f;
}

__global__ void relu_inplace(float* __restrict__ t, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = t[i]; t[i] = v < 0.0f ? 0.0f : v; }
}

// The two launches are captured once into a CUDA graph (per pointer pair and size) on a private stream and
// replayed on the caller's stream: one graph launch instead of two kernel launches. Real wins come with
// many small kernels per forward; fusing them (one kernel) is better still when possible.
static cudaStream_t capture_stream = nullptr;
static cudaGraphExec_t cached_exec = nullptr;
static const float* cached_x = nullptr;
static float* cached_y = nullptr;
static long long cached_n = -1;

extern "C" int graph_launch(const float* x, float* y, long long n, cudaStream_t stream) {
    cudaError_t err;
    if (cached_exec == nullptr || x != cached_x || y != cached_y || n != cached_n) {
        if (capture_stream == nullptr) {
            err = cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking);
            if (err != cudaSuccess) return (int)err;
        }
        if (cached_exec != nullptr) { cudaGraphExecDestroy(cached_exec); cached_exec = nullptr; }
        const int threads = 256;
        unsigned blocks = (unsigned)((n + threads - 1) / threads);
        cudaGraph_t graph;
        err = cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal);
        if (err != cudaSuccess) return (int)err;
        affine<<<blocks, threads, 0, capture_stream>>>(x, y, n);
        relu_inplace<<<blocks, threads, 0, capture_stream>>>(y, n);
        err = cudaStreamEndCapture(capture_stream, &graph);
        if (err != cudaSuccess) return (int)err;
        err = cudaGraphInstantiate(&cached_exec, graph, 0);
        cudaGraphDestroy(graph);
        if (err != cudaSuccess) { cached_exec = nullptr; return (int)err; }
        cached_x = x; cached_y = y; cached_n = n;
    }
    return (int)cudaGraphLaunch(cached_exec, stream);
}
"""

lib = cuda_library({"graph_chain.cu": SOURCE}, name="graph_chain")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.graph_launch(x, y, x.numel())
        return y
