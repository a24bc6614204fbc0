"""What every part of a client shares: its config, its cache directory and its fleet of workers, and the
environments and settings its requests get from them.

The fleet is read here at each use (never copied into the parts), so a client's fleet is one object
wherever it is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..judge.build.sources import source_hash
from ..rules.config import JudgeConfig, SandboxConfig
from ..rules.messages import Source
from ..rules.protocols import resolve


@dataclass
class Sandbox:
    config: SandboxConfig
    cache_dir: Path
    fleet: Any = None  # kernels_env.runtime.backends: make_fleet's local or Ray fleet

    @classmethod
    def of(cls, config: SandboxConfig) -> Sandbox:
        return cls(config, Path(os.path.expanduser(config.cache_dir)).resolve())

    @property
    def device(self) -> str | None:
        return self.fleet.device

    @property
    def cuda_arch(self) -> str:
        return self.fleet.cuda_arch

    def settings(self, judge: JudgeConfig) -> dict[str, Any]:
        """The resolved judge settings on this client's device, shared by its run workers per device."""
        per, lock = self.config.run_workers_per_gpu, self.fleet.timing_lock
        return resolve(judge, self.device, per, lock)

    def cache_env(self) -> dict[str, str]:
        fastpath = str(self.cache_dir / "fastpath")
        return {"KERNELS_ENV_CACHE_DIR": fastpath, "KERNELS_ENV_SANDBOX_CACHE": str(self.cache_dir)}

    def request_env(self, sol: Source) -> dict[str, str]:
        return {
            **self.cache_env(),
            "TORCH_EXTENSIONS_DIR": str(self.cache_dir / "torch_extensions" / source_hash(sol)[:16]),
            "TORCH_CUDA_ARCH_LIST": self.cuda_arch,
            "KERNELS_ENV_CUDA_ARCH": self.cuda_arch,
        }

    def tool_env(self) -> dict[str, str]:
        """A tool call's environment without a solution (its builds, if any, are the reference's)."""
        return {**self.cache_env(), "KERNELS_ENV_CUDA_ARCH": self.cuda_arch}
