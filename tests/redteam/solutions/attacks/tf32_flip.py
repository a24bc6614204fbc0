# redteam: class=10 expect=precision_state problem=matmul policy=strict
"""Attack: switch TF32 on for matmuls inside forward (a reference run afterwards would be downgraded too)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    c = tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, A, B):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.set_float32_matmul_precision("medium")
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
        matmul_kernel[(1,)](A, B, C, M, N, K, BM=16, BN=32, BK=32)
        return C
