"""Policies by name: what a solution may do (the judge protocol says how it is checked), in one place.

A ``Policy`` is data: precision rules (TF32 / half allowed, and the fp32 tolerance floor that such a downgrade
implies), which vendor libraries may be called, and what may run inside ``ModelNew.forward`` as the guard
enforces it (``decide``: which PyTorch operators, from which origin; the kernel census: which kernels may run
and which count as the solution's own work). The operator sets are in ``rules.operators``.

Enforcement is a separate layer: ``policy_guard(policy)`` is the one seam, and ``ModelNew.forward`` always
runs inside the context manager it returns. The judge (``judge.run.enforce``, imported by every run
worker) points ``GUARD_FACTORY`` at ``kernels_env.guard``; without it (this module alone) the seam is a no-op
and results say ``"guard_enforced": false``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass, field
from typing import Any

from ._registry import Registry
from .operators import (
    ALLOC,
    ALLOC_INIT,
    ALLOWED,
    BLAS,
    CONV,
    CUSTOM,
    DNN,
    FORBIDDEN,
    GEMM,
    HOST_ESCAPE,
    HOST_ESCAPE_OPS,
    MEMCPY_D2D,
    MEMCPY_H2D,
    META,
    NEUTRAL_NAMESPACES,
    RAW_MEMORY,
    RAW_MEMORY_OPS,
    RUNTIME_DATA_MOVEMENT,
    TORCH_KERNEL,
    TORCH_NAMESPACES,
    VIEW,
)


@dataclass(frozen=True)
class Policy:
    name: str
    description: str
    allowed_libraries: tuple[str, ...] = ()  # e.g. ("cublas", "cudnn")
    allow_tf32: bool = False  # TF32 matmul/conv allowed; baselines are then timed with TF32 on as well
    allow_half: bool = False  # fp16/bf16 internal compute allowed for fp32 tasks
    fp32_tolerance_floor: float | None = None  # fp32 atol/rtol raised to at least this (TF32/half downgrade)
    # What the guard enforces inside ModelNew.forward:
    # Any PyTorch compute from any origin (KernelBench's "glue"): only raw-memory adoption and host escapes
    # stay forbidden, and the census still demands custom kernels that do the work.
    allow_torch_glue: bool = False
    allowed_ops: frozenset[str] = frozenset()  # allowed from any origin (Python API or compiled code)
    compiled_only_ops: frozenset[str] = frozenset()  # only from compiled code, never torch.* in Python
    census_allowed: frozenset[str] = frozenset({CUSTOM, ALLOC_INIT, MEMCPY_D2D, MEMCPY_H2D})
    census_work: frozenset[str] = frozenset({CUSTOM})  # kernels that count as "the solution did the work"
    min_work_launches: int = 1
    min_work_share: float = 0.0  # share of device time spent in census_work kernels
    forbid_d2h: bool = True
    forbid_swallowed_exceptions: bool = True
    extra: dict = field(default_factory=dict, compare=False)

    def decide(self, namespace: str, name: str, origin: str) -> str:
        """Judge one operator call. ``origin``: 'python' (torch API called from Python), 'compiled' (C++ of
        an extension, no Python torch call on the stack) or 'runtime' (a kernel runtime's own plumbing)."""
        if namespace in NEUTRAL_NAMESPACES:
            return ALLOWED
        if namespace not in TORCH_NAMESPACES:
            return ALLOWED  # a custom op: its ATen internals are audited from the profiler trace
        if name in ALLOC or name in VIEW or name in META:
            return ALLOWED
        if origin == "runtime" and name in RUNTIME_DATA_MOVEMENT:
            return ALLOWED
        if name in RAW_MEMORY_OPS:
            return RAW_MEMORY
        if name in HOST_ESCAPE_OPS:
            return HOST_ESCAPE
        if self.allow_torch_glue or name in self.allowed_ops:
            return ALLOWED
        if name in self.compiled_only_ops and origin != "python":
            return ALLOWED
        return FORBIDDEN


POLICIES: Registry[Policy] = Registry("policy")


def register_policy(policy: Policy) -> Policy:
    return POLICIES.register(policy.name, policy)


register_policy(
    Policy(
        name="strict",
        description="no PyTorch compute inside ModelNew: allocation, views and metadata only; custom kernels "
        "(CUDA via the fast path or load_inline, Triton, CuPy RawKernel) must do all the work; FP32",
    )
)
register_policy(
    Policy(
        name="cuda_agent",
        description="strict plus cuBLAS GEMM and cuDNN convolution, called from the solution's own compiled "
        "code (C++ torch::mm/conv inside an extension, or cuBLAS/cuDNN directly) or CuPy; never torch.* "
        "GEMM from Python; TF32/half allowed",
        allowed_libraries=("cublas", "cudnn"),
        allow_tf32=True,
        allow_half=True,
        fp32_tolerance_floor=1e-2,
        compiled_only_ops=GEMM | CONV,
        census_allowed=frozenset({CUSTOM, ALLOC_INIT, MEMCPY_D2D, MEMCPY_H2D, BLAS, DNN}),
        census_work=frozenset({CUSTOM, BLAS, DNN}),
    )
)
register_policy(
    Policy(
        name="kernelbench",
        description="what KernelBench accepts, minus what the runtime checks prove to be a hack: PyTorch "
        "glue (any PyTorch operator, from Python or compiled code) next to custom kernels that run and do "
        "real work; try/except fallbacks and pass-throughs of the reference Model rejected; every other "
        "defence stays on; FP32 precision",
        allow_torch_glue=True,
        census_allowed=frozenset({CUSTOM, ALLOC_INIT, MEMCPY_D2D, MEMCPY_H2D, BLAS, DNN, TORCH_KERNEL}),
        census_work=frozenset({CUSTOM}),
        # A decoy next to PyTorch doing the work: custom kernels must take at least 2% of the device time
        # (GPU only; on a CPU the census counts launches, not time).
        min_work_share=0.02,
    )
)


def get_policy(policy: Policy | str) -> Policy:
    """A policy given by name (or the policy itself)."""
    if isinstance(policy, Policy):
        return policy
    if not isinstance(policy, str):
        raise ValueError(f"a policy is a name or a Policy, not {type(policy).__name__}")
    return POLICIES.get_named(policy)


def _no_guard(policy: Policy, **context: Any) -> ContextManager[Any]:
    return contextlib.nullcontext()


# The enforcement layer replaces this factory: (policy, **context) -> context manager around ModelNew.forward.
GUARD_FACTORY: Callable[..., ContextManager[Any]] = _no_guard


def policy_guard(policy: Policy | str, **context: Any) -> ContextManager[Any]:
    """The context manager ``ModelNew.forward`` runs in (the guard, once ``judge.run.enforce`` installed it).

    ``context`` carries what an enforcing guard may need (e.g. ``device``, ``stage``); a guard signals a
    violation by raising ``PolicyViolation``, which the harness turns into a ``rejected`` verdict.
    """
    return GUARD_FACTORY(get_policy(policy), **context)


def guard_enforced() -> bool:
    return GUARD_FACTORY is not _no_guard


class PolicyViolation(Exception):
    """Raised by a guard: the verdict becomes ``rejected`` with ``check`` and ``evidence`` from here."""

    def __init__(self, check: str, evidence: Any = None, message: str = ""):
        super().__init__(message or f"policy check {check!r} failed")
        self.check = check
        self.evidence = evidence
