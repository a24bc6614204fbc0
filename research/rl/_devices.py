"""Which GPUs the learner (this JAX process) uses, which the sandbox judges on, and JAX's memory share.

GPU ids are CUDA ordinals of this process (indices into what ``CUDA_VISIBLE_DEVICES`` lists, or into
``nvidia-smi``'s numbering when it is unset). The learner's are applied through ``jax_cuda_visible_devices``
rather than ``CUDA_VISIBLE_DEVICES``: the environment is inherited by the sandbox's worker processes,
which must still see their judge GPUs; the JAX flag narrows JAX alone. The judge GPUs go to
``SandboxConfig.gpus`` (kernels_env gives each run worker one of them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MEM_FRACTION_ENV = "XLA_PYTHON_CLIENT_MEM_FRACTION"


@dataclass
class DevicesConfig:
    learner_gpus: list[int] | None = None  # None: every GPU JAX sees (today's default)
    judge_gpus: list[int] | None = None  # None: every visible GPU, one run worker each (today's default)
    # Share of each learner GPU that JAX preallocates; None: $XLA_PYTHON_CLIENT_MEM_FRACTION, else JAX's
    # 0.75. Where judge and learner share a GPU, leave the torch workers room (scripts/gpu_toy_rl.sh: 0.25).
    jax_memory_fraction: float | None = None

    def __post_init__(self) -> None:
        f = self.jax_memory_fraction
        if f is not None and not 0.0 < f <= 1.0:
            raise ValueError(f"devices.jax_memory_fraction must be in (0, 1], got {f}")
        for name in ("learner_gpus", "judge_gpus"):
            ids = getattr(self, name)
            if ids is None:
                continue
            if not ids or any(i < 0 for i in ids) or len(set(ids)) != len(ids):
                raise ValueError(f"devices.{name} must be distinct GPU ordinals >= 0 (or null), got {ids}")


def apply_devices(cfg: DevicesConfig) -> None:
    """Apply ``cfg`` to this process's JAX; must run before JAX creates its backends (first device query
    or computation), which is when XLA reads both settings."""
    import jax
    from jax._src import xla_bridge

    changes = cfg.learner_gpus is not None or cfg.jax_memory_fraction is not None
    if changes and xla_bridge.backends_are_initialized():
        raise RuntimeError("devices: JAX backends already exist; apply the devices config before using JAX")
    if cfg.jax_memory_fraction is not None:
        os.environ[MEM_FRACTION_ENV] = str(cfg.jax_memory_fraction)
    if cfg.learner_gpus is not None:
        jax.config.update("jax_cuda_visible_devices", ",".join(str(i) for i in cfg.learner_gpus))


__all__ = ["MEM_FRACTION_ENV", "DevicesConfig", "apply_devices"]
