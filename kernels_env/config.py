"""Typed configuration of the sandbox and of batch evaluation (filled from Hydra by ``experiments``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SandboxConfig:
    """Where and how candidates run. ``device='auto'`` picks CUDA when a GPU is visible, else CPU mode."""

    device: str = "auto"  # auto | cpu | cuda
    num_gpu_workers: int = 0  # 0: one worker per visible GPU (one in CPU mode)
    num_compile_workers: int = 2
    compile_timeout_s: float = 300.0
    run_timeout_s: float = 120.0
    memory_limit_gb: float = 16.0  # host memory a worker may hold before it is killed
    cache_dir: str = "~/.cache/cuda_agent_jax"


@dataclass
class JudgeConfig:
    """What judges a candidate: protocol (how correctness is checked), policy (what it may do), reward."""

    protocol: str = "kernelbench"  # kernelbench | cuda_agent
    policy: str = "strict"  # strict | cuda_agent | kernelbench
    reward: str = "cuda_agent"  # name in the reward registry
    num_trials: int | None = None  # None: the protocol's default
    baselines: list[str] = field(default_factory=lambda: ["eager", "compile", "max-autotune"])


@dataclass
class BatchConfig:
    """Evaluate every solution in ``solutions_dir`` against its problem in ``problems_dir``."""

    problems_dir: str = "examples/problems"
    solutions_dir: str = "examples/solutions"
    out_dir: str = "."  # experiments set this to the Hydra run directory
    resume: bool = True
    progress: bool = True
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
