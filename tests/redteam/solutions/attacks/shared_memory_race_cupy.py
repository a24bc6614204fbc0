# redteam: class=13 expect=shared_memory_race problem=relu policy=strict device=cuda probe=race
"""Attack (issue 31's held-out red team, and the shared-memory races of public leaderboard kernels): each
thread writes its ReLU into shared memory and then reads its neighbour's slot (lane ``t ^ 1``, same warp)
with no ``__syncthreads``/``__syncwarp`` in between. Under typical (convergent) scheduling the whole warp
stores before it loads, so the answer is right every time: the three answers of trial 0 agree, nothing
stays poisoned, and without a probe the verdict was ``correct``. Any change of scheduling (independent
thread scheduling diverging the warp, a new architecture, a compiler reordering) makes it wrong.

Defence: the race probe (``kernels_env.judge.race_probe``): compute-sanitizer racecheck on a correct GPU
verdict (here ``race_check="always"``; by default the top reward tier) reports the unordered write/read of
shared memory: ``shared_memory_race``. Its twin with the barrier, ``legit/shared_memory_barrier_cupy``, is
accepted with a clean probe.
"""

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
  int u = t ^ 1;  /* the neighbour's slot: written by another thread, and no barrier orders it */
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
