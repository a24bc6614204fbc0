"""Policies by name: what a solution may do (the judge protocol says how it is checked).

A ``Policy`` is data: precision rules (TF32 / half allowed, and the fp32 tolerance floor that such a downgrade
implies), whether PyTorch compute may run inside ``ModelNew``, and which vendor libraries may be called.

Enforcement is a separate layer. ``policy_guard(policy)`` is the one seam: ``ModelNew.forward`` always runs
inside the context manager it returns. In this module it is a no-op guard: it enforces NOTHING yet. The
dispatch-level interception, poisoned memory and other reward-hack defences live in ``kernels_env.guard``
(issue 5) and plug in by replacing ``GUARD_FACTORY``; until then a policy only changes precision settings
and tolerances, and results say ``"enforced": false`` under ``judge``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Policy:
    name: str
    description: str
    allow_torch_compute: bool  # PyTorch compute ops inside ModelNew.forward (else allocation/views only)
    allowed_libraries: tuple[str, ...] = ()  # e.g. ("cublas", "cudnn")
    allow_tf32: bool = False  # TF32 matmul/conv allowed; baselines are then timed with TF32 on as well
    allow_half: bool = False  # fp16/bf16 internal compute allowed for fp32 tasks
    fp32_tolerance_floor: float | None = None  # fp32 atol/rtol raised to at least this (TF32/half downgrade)


POLICIES: dict[str, Policy] = {}


def register_policy(policy: Policy) -> Policy:
    POLICIES[policy.name] = policy
    return policy


register_policy(
    Policy(
        name="strict",
        description="no PyTorch compute inside ModelNew (allocation, views, metadata only); FP32 precision",
        allow_torch_compute=False,
    )
)
register_policy(
    Policy(
        name="cuda_agent",
        description="strict plus cuBLAS GEMM / cuDNN conv from the solution's own code; TF32/half allowed",
        allow_torch_compute=False,
        allowed_libraries=("cublas", "cudnn"),
        allow_tf32=True,
        allow_half=True,
        fp32_tolerance_floor=1e-2,
    )
)
register_policy(
    Policy(
        name="kernelbench",
        description="PyTorch fallback for some operators allowed, as KernelBench permits; FP32 precision",
        allow_torch_compute=True,
    )
)


def get_policy(name: str) -> Policy:
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; known: {sorted(POLICIES)}")
    return POLICIES[name]


def _no_guard(policy: Policy, **context: Any) -> ContextManager[Any]:
    return contextlib.nullcontext()


# The enforcement layer replaces this factory: (policy, **context) -> context manager around ModelNew.forward.
GUARD_FACTORY: Callable[..., ContextManager[Any]] = _no_guard


def policy_guard(policy: Policy | str, **context: Any) -> ContextManager[Any]:
    """The context manager ``ModelNew.forward`` runs in. NO-OP for now: it enforces nothing (see module doc).

    ``context`` carries what an enforcing guard may need (e.g. ``device``, ``stage``); a guard signals a
    violation by raising ``PolicyViolation``, which the harness turns into a ``rejected`` verdict.
    """
    return GUARD_FACTORY(get_policy(policy) if isinstance(policy, str) else policy, **context)


def guard_enforced() -> bool:
    return GUARD_FACTORY is not _no_guard


class PolicyViolation(Exception):
    """Raised by a guard: the verdict becomes ``rejected`` with ``check`` and ``evidence`` from here."""

    def __init__(self, check: str, evidence: Any = None, message: str = ""):
        super().__init__(message or f"policy check {check!r} failed")
        self.check = check
        self.evidence = evidence
