"""Fixtures of the sandbox tests: tiny KernelBench-format problems and solutions written on the fly, and
CPU-mode clients shared per module (a client start costs a few seconds: worker processes import torch)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernels_env.client import SandboxClient
from kernels_env.config import JudgeConfig, SandboxConfig

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

RELU_TORCH = """
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


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def relu_with(forward_body: str, header: str = "", init: str = "pass") -> str:
    """A ModelNew for the relu problem whose forward body (and module header) the test chooses."""
    body = textwrap.indent(textwrap.dedent(forward_body).strip(), " " * 8)
    return (
        "import torch\nimport torch.nn as nn\n" + textwrap.dedent(header).strip() + "\n\n"
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


FAST = JudgeConfig(time_candidate=False, num_trials=2)  # correctness only: most tests need nothing more
