"""Shared constants of the fast-path tests."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]

RELU_CU = r"""
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

extern "C" int relu_launch(const float* x, float* y, int n, cudaStream_t stream) {
  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
"""
