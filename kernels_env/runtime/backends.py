"""The sandbox's backends by name (``SandboxConfig.backend``): ``local`` (``fleet.Fleet``, worker processes on
this machine) and ``ray`` (``ray_fleet.RayFleet``, Ray actors on a cluster; Ray itself is imported only when
its pool starts)."""

from __future__ import annotations

from pathlib import Path

from ..rules.config import SandboxConfig
from .fleet import Fleet
from .ray_fleet import RayFleet


def make_fleet(config: SandboxConfig, cache_dir: Path, cache_env: dict[str, str]) -> Fleet:
    """The fleet of ``config.backend``: worker processes on this machine, or Ray actors on a cluster."""
    if config.backend == "ray":
        return RayFleet(config, cache_dir, cache_env)
    if config.backend != "local":
        raise ValueError(f"unknown sandbox backend {config.backend!r}; use 'local' or 'ray'")
    return Fleet(config, cache_dir, cache_env)
