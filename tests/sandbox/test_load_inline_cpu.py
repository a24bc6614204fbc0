"""load_inline in CPU mode (slow: a torch/extension.h build takes minutes on 2 cores): the CUDA build runs
for real with a CPU-only torch (linked against stub CUDA libraries, never loaded) and gives real verdicts."""

from __future__ import annotations

import pytest

from kernels_env.client import SandboxClient
from kernels_env.rules.config import JudgeConfig

from .conftest import RELU_PROBLEM, cpu_config, src

pytestmark = pytest.mark.toolchain

SOLUTION = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void relu_kernel(const float* x, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] > 0.f ? x[i] : 0.f;%s
}
torch::Tensor relu_cuda(torch::Tensor x) {
    auto out = torch::empty_like(x);
    long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
ext = load_inline(name="cpu_mode_relu%s", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu_cuda"])

class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cuda(x)
'''


@pytest.fixture(scope="module")
def slow_client(cache_dir):
    with SandboxClient(cpu_config(cache_dir, compile_timeout_s=900, num_compile_workers=2)) as sb:
        yield sb


def test_load_inline_compiles_in_cpu_mode(slow_client):
    ok = slow_client.submit(src(RELU_PROBLEM), SOLUTION % ("", ""), JudgeConfig(time_candidate=False))
    bad = slow_client.submit(
        src(RELU_PROBLEM), SOLUTION % ("\n    out[i] += missing;", "_bad"), JudgeConfig(time_candidate=False)
    )
    res = ok.result()
    assert res["status"] == "not_run", (res["error"], res["messages"])
    assert "load_inline" in res["backends"] and res["reward"] is None
    res = bad.result()
    assert res["status"] == "compile_error" and res["reward"] == -1.0
    diag = next(m for m in res["messages"] if m["kind"] == "compiler" and m["severity"] == "error")
    # line 5 of the candidate's cuda_sources string (torch prepends 3 include lines to cuda.cu)
    assert diag["file"] == "cuda_sources" and diag["line"] == 5 and "missing" in diag["message"]
