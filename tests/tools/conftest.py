"""Fixtures of the tools tests: recorded outputs (CPU-side, real), real GPU outputs under fixtures/real/
(from scripts/gpu_profiler.sh), small KernelBench-style problems, and one CPU-mode sandbox client shared by
the tests that go through the client (a client start costs a few seconds: its workers import torch)."""

from __future__ import annotations

import pytest

from kernels_env.client import SandboxClient
from kernels_env.rules.config import SandboxConfig


@pytest.fixture(autouse=True)
def private_fastpath_cache(tmp_path_factory, monkeypatch):
    """Tools run in-process by a test build through the fast path: keep its cache out of ~/.cache."""
    monkeypatch.setenv("KERNELS_ENV_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "fastpath_cache"))


@pytest.fixture(scope="session")
def tools_client(tmp_path_factory):
    """A CPU-mode client (one compile worker, a run worker and its standby) for the whole session."""
    config = SandboxConfig(
        device="cpu",
        cache_dir=str(tmp_path_factory.mktemp("tools_sandbox_cache")),
        num_compile_workers=1,
        compile_timeout_s=120,
        memory_limit_gb=4.0,
        startup_timeout_s=240,
    )
    with SandboxClient(config) as sb:
        yield sb
