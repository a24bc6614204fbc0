# redteam: expect=accepted problem=linear_relu policy=cuda_agent style=cupy-cublas device=cuda
"""Legit under cuda_agent: cuBLAS GEMM through CuPy (cp.matmul into a torch-allocated output), then a
RawKernel bias + ReLU epilogue in place."""

import cupy as cp
import torch
import torch.nn as nn

_SRC = r"""
extern "C" __global__ void bias_relu(float* y, const float* b, long long rows, long long cols) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < rows * cols) { float v = y[i] + b[i % cols]; y[i] = (v > 0.f || v != v) ? v : 0.f; }
}
"""
_bias_relu = cp.RawKernel(_SRC, "bias_relu")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.linear.weight.detach(), self.linear.bias.detach()
        y = x.new_empty((x.shape[0], w.shape[0]))
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            cp.matmul(cp.asarray(x.detach()), cp.asarray(w).T, out=cp.asarray(y))
            n = y.numel()
            _bias_relu(
                ((n + 255) // 256,),
                (256,),
                (y.data_ptr(), b.data_ptr(), cp.int64(y.shape[0]), cp.int64(y.shape[1])),
            )
        return y
