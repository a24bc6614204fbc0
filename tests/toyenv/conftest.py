"""Fixtures of the toyenv tests: a small task set (no decontamination: that has its own test) and one CPU-mode
sandbox client per session (a client start costs a few seconds: its workers import torch)."""

from __future__ import annotations

import pytest

from kernels_env.client import JudgeConfig, SandboxClient, SandboxConfig
from research.toyenv import ToyTaskConfig, make_tasks

SMALL = ToyTaskConfig(num_train=24, num_test=6, num_heldout=6, decontam_dir=None)
# Correctness only, two trials, no adversarial families: what these tests need (strict policy, the default).
FAST = JudgeConfig(time_candidate=False, num_trials=2, families=[])


@pytest.fixture(scope="session")
def tasks():
    return make_tasks(SMALL)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory):
    cache = tmp_path_factory.mktemp("toy_sandbox_cache")
    cfg = SandboxConfig(
        device="cpu",
        cache_dir=str(cache),
        num_compile_workers=1,
        compile_timeout_s=60,
        run_timeout_s=60,
        memory_limit_gb=4.0,
        startup_timeout_s=240,
    )
    with SandboxClient(cfg) as sb:
        yield sb
