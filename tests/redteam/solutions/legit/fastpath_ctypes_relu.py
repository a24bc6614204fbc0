# redteam: expect=accepted problem=relu policy=strict style=fast-path device=cuda
"""Legit, fast-path style: nvcc -> shared library -> ctypes launcher on torch's current stream (no torch
headers, no dispatcher: what kernels_env.fastpath.cuda_library does)."""

import ctypes
import importlib.util
import os

import torch
import torch.nn as nn

_spec = importlib.util.spec_from_file_location(
    "_nvcc_lib", os.path.join(os.path.dirname(__file__), "..", "_nvcc_lib.py")
)
_nvcc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_nvcc)

_SRC = r"""
#include <cuda_runtime.h>
__global__ void relu_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[i] = (v > 0.f || v != v) ? v : 0.f; }
}
extern "C" int launch_relu(const float* x, float* y, long long n, void* stream) {
  relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
"""
_lib = _nvcc.build(_SRC, "relu")
_lib.launch_relu.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p]
_lib.launch_relu.restype = ctypes.c_int


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        err = _lib.launch_relu(x.data_ptr(), y.data_ptr(), x.numel(), torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"CUDA launch failed with error {err}")
        return y
