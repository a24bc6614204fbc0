"""Fixtures of the sandbox tests: tiny KernelBench-format problems and solutions written on the fly, and
CPU-mode clients shared per module (a client start costs a few seconds: worker processes import torch)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernels_env.client import SandboxClient
from kernels_env.rules.config import JudgeConfig, SandboxConfig

RELU_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

N = 1024

def get_inputs():
    return [torch.rand(N) * 2 - 1]

def get_init_inputs():
    return []
"""

LINEAR_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return self.fc(x)

def get_inputs():
    return [torch.rand(8, 16)]

def get_init_inputs():
    return [16, 4]
"""

RELU_TORCH = """  # plain PyTorch: rejected under every policy (no custom kernel does the work)
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, min=0.0)
"""

RELU_TRITON = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out
"""


# Kernels a test's forward body can call (the judge enforces the strict policy: PyTorch may allocate and view,
# never compute): relu(x, out=None, shift=0.0) = max(x - shift, 0) and linear(x, w, b) = x @ w.T + b.
KERNELS = """
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x - shift, 0.0), mask=mask)


def relu(x, out=None, shift=0.0):
    out = torch.empty_like(x) if out is None else out
    _relu_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), shift, BLOCK=256)
    return out


@triton.jit
def _linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, k_dim, n_dim, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_dim
    acc = tl.load(b_ptr + cols, mask=mask, other=0.0)
    for k in range(k_dim):
        acc += tl.load(x_ptr + row * k_dim + k) * tl.load(w_ptr + cols * k_dim + k, mask=mask, other=0.0)
    tl.store(y_ptr + row * n_dim + cols, acc, mask=mask)


def linear(x, w, b):
    y = x.new_empty((x.shape[0], w.shape[0]))
    block = triton.next_power_of_2(w.shape[0])
    _linear_kernel[(x.shape[0],)](x, w, b, y, x.shape[1], w.shape[0], BLOCK_N=block)
    return y
"""


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def relu_with(forward_body: str, header: str = "", init: str = "pass") -> str:
    """A ModelNew for the relu problem whose forward body (and module header) the test chooses; the body may
    call ``relu`` and ``linear`` (custom Triton kernels, see ``KERNELS``)."""
    body = textwrap.indent(textwrap.dedent(forward_body).strip(), " " * 8)
    return (
        "import torch\nimport torch.nn as nn\n" + textwrap.dedent(header).strip() + "\n" + KERNELS + "\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        f"        {init}\n\n"
        "    def forward(self, x):\n" + body + "\n"
    )


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sandbox_cache")


def cpu_config(cache_dir: Path, **overrides) -> SandboxConfig:
    base = dict(
        device="cpu",
        cache_dir=str(cache_dir),
        num_compile_workers=1,
        compile_timeout_s=60,
        run_timeout_s=60,
        memory_limit_gb=4.0,
        startup_timeout_s=240,
    )
    base.update(overrides)
    return SandboxConfig(**base)


@pytest.fixture(scope="session")
def client(cache_dir):
    """A CPU-mode client with generous limits, shared by the whole session."""
    with SandboxClient(cpu_config(cache_dir)) as sb:
        yield sb


# Correctness only, no adversarial families: most tests need nothing more (the red-team suite runs them all).
FAST = JudgeConfig(time_candidate=False, num_trials=2, families=[])
