"""One load_inline extension shared by the load_inline cases (a helper module of their workspaces): same
source, name and build directory (under the sandbox's cache), so it is built once (~50 s), by the first
compile stage that needs it, and found built by the others and by the run stage.

Functions: ``relu_cuda`` (a custom kernel), ``torch_relu`` (torch::relu in C++: compute the guard must see),
``linear_relu_cuda_agent`` (torch::addmm from compiled code, as the cuda_agent policy allows, then the custom
ReLU kernel in place)."""

import os

from torch.utils.cpp_extension import load_inline

CPP = """
torch::Tensor relu_cuda(torch::Tensor x);
torch::Tensor torch_relu(torch::Tensor x);
torch::Tensor linear_relu_cuda_agent(torch::Tensor x, torch::Tensor w, torch::Tensor b);
"""

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void relu_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i]; y[i] = (v > 0.f || v != v) ? v : 0.f; }
}

static void launch_relu(const float* x, float* y, long long n) {
  if (n == 0) return;
  relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(x, y, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor relu_cuda(torch::Tensor x) {
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  launch_relu(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
  return y;
}

torch::Tensor torch_relu(torch::Tensor x) { return torch::relu(x); }

torch::Tensor linear_relu_cuda_agent(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  auto y = torch::addmm(b, x, w.t());
  launch_relu(y.data_ptr<float>(), y.data_ptr<float>(), y.numel());
  return y;
}
"""


def build():
    directory = os.path.join(os.environ.get("KERNELS_ENV_SANDBOX_CACHE", "/tmp"), "redteam_inline_ext")
    os.makedirs(directory, exist_ok=True)
    return load_inline(
        name="redteam_inline_ext",
        cpp_sources=CPP,
        cuda_sources=CUDA,
        functions=["relu_cuda", "torch_relu", "linear_relu_cuda_agent"],
        extra_cuda_cflags=["-O2"],
        build_directory=directory,
        verbose=False,
    )
