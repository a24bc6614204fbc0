# redteam: expect=accepted problem=relu policy=strict style=cupy-shared-barrier device=cuda probe=race
"""Legit: ``attacks/shared_memory_race_cupy`` with its barrier: each thread writes its ReLU into shared
memory, ``__syncthreads()``, then reads another warp's slot (``t ^ 32``). The race probe (racecheck, forced on
for this case) must find nothing and the verdict stay ``correct``: the probe's false-positive check."""

import cupy as cp
import torch
import torch.nn as nn

_SRC = r"""
extern "C" __global__ void relu_swap(const float* x, float* y, long long n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  long long base = blockIdx.x * 256LL;
  float v = base + t < n ? x[base + t] : 0.f;
  s[t] = (v > 0.f || v != v) ? v : 0.f;
  __syncthreads();
  int u = t ^ 32;
  if (base + u < n) y[base + u] = s[u];
}
"""
_relu = cp.RawKernel(_SRC, "relu_swap")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            _relu(((n + 255) // 256,), (256,), (x.data_ptr(), y.data_ptr(), cp.int64(n)))
        return y
