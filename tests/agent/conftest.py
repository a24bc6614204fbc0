"""Fixtures of the agent tests: one CPU-mode sandbox client for the session (Triton runs under the
interpreter, CUDA compiles with nvcc and is not run), a tiny ReLU problem and a correct Triton solution."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernels_env.client import JudgeConfig, SandboxClient, SandboxConfig

RELU_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(300) * 2 - 1]


def get_init_inputs():
    return []
"""

RELU_TRITON = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x < 0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out
"""

# Correctness only, few trials, no adversarial families: fast on 2 CPU cores (the red-team suite runs them).
FAST = JudgeConfig(time_candidate=False, num_trials=2, families=[])


def write_call(content: str = RELU_TRITON) -> dict:
    return {"name": "write_file", "arguments": {"path": "model_new.py", "content": content}}


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory):
    config = SandboxConfig(
        device="cpu",
        cache_dir=str(tmp_path_factory.mktemp("agent_sandbox_cache")),
        num_compile_workers=1,
        compile_timeout_s=120,
        run_timeout_s=120,
        memory_limit_gb=4.0,
        startup_timeout_s=240,
        standby_run_workers=False,
    )
    with SandboxClient(config, FAST) as sb:
        yield sb


@pytest.fixture()
def relu_problem(tmp_path) -> Path:
    path = tmp_path / "problems" / "level1" / "1_relu.py"
    path.parent.mkdir(parents=True)
    path.write_text(RELU_PROBLEM)
    return path


def script_file(tmp_path: Path, steps) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(steps))
    return str(path)
