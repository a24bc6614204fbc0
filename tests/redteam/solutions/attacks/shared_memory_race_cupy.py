# redteam: class=13 expect=shared_memory_race|nondeterministic|incorrect|recheck_mismatch problem=relu policy=strict device=cuda probe=race
"""Attack (issue 31's held-out red team, and the shared-memory races of public leaderboard kernels): each
thread writes its ReLU into shared memory and then reads the slot of the thread 32 lanes away (``t ^ 32``:
another warp) with no ``__syncthreads`` in between. The warps of a block usually all store before any of them
loads, so the answer is mostly right and without a probe the verdict was usually ``correct``; another
scheduling makes it wrong. (The first version raced within a warp, ``t ^ 1``: on the H200 racecheck reported
no hazard there, 2026-12-04: the intra-warp race is an open gap.) On the H200 (2026-12-04) the cross-warp race
gave different answers on identical inputs and was rejected ``nondeterministic`` before the probe; a wrong
trial gives ``incorrect`` / ``recheck_mismatch``; a run where every answer happens to agree meets the
probe: caught every way.

Defence: the race probe (``kernels_env.judge.assemble.race_probe``): compute-sanitizer racecheck on a correct GPU
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
  int u = t ^ 32;  /* another warp's slot: written by another thread, and no barrier orders it */
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
