# redteam: expect=accepted problem=linear_relu policy=strict style=fused-weights
"""Legit: fused linear + bias + ReLU in one Triton kernel. nn.Linear only holds the parameters (seed replay
gives it the reference's weights); it is never called. The weight is read through strides, no copy."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym, syn,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        x = tl.load(
            x_ptr + rm[:, None] * sxm + rk[None, :] * sxk,
            mask=(rm[:, None] < M) & (rk[None, :] < K),
            other=0.0,
        )
        w = tl.load(
            w_ptr + rk[:, None] * swk + rn[None, :] * swn,
            mask=(rk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(x, w, input_precision="ieee")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    acc = tl.maximum(acc + bias[None, :], 0.0, propagate_nan=tl.PropagateNan.ALL)
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        y = x.new_empty((M, N))
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
        linear_relu_kernel[grid](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                 y.stride(0), y.stride(1), BM=16, BN=16, BK=16)  # fmt: skip
        return y
