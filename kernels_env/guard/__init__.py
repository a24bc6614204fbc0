"""Reward-hack defences: what a candidate may run inside ModelNew.forward and what it must not touch.

The judge wraps every call of the candidate's forward in ``policy_guard(policy, ...)``; the guard intercepts
PyTorch at the function and dispatch levels, poisons fresh memory, audits the profiler trace, takes a kernel
census, watches threads, streams, launch errors, global torch state and introspection, and raises
``GuardViolation`` (check name + evidence) when a rule is broken. ``check_outputs`` and friends judge what the
forward returned; ``Integrity`` and ``TorchGlobalState`` protect timer/checker code and precision flags
around timing. The judge (``kernels_env.judge.run.enforce``, used by the run worker) calls all of it in the
order of docs/reward_hacks.md, "The judge's pipeline".

May import: the standard library, torch, numpy, psutil; triton/cupy only when a solution already loaded them.
Must never import: jax, flax, optax, orbax, ``models``, ``research``, ``experiments``, hydra, omegaconf.
"""

from ._census import Census, KernelLaunch, census_violations, classify_kernel
from ._checks import ALL_CHECKS, GuardViolation, Violation
from ._guard import Guard, TimingAudit, bitwise_equal, load_guard, policy_guard, warm_up_profiler
from ._memory import poison_free_cuda_memory, poison_tensor, poisoned_count
from ._outputs import (
    check_outputs,
    constant_output_violation,
    determinism_violations,
    layout_notes,
    poisoned_output_violations,
    reused_output_violations,
)
from ._speed import roofline_floor_s, speed_violations
from ._state import Integrity, TorchGlobalState
from ._threads import ThreadSnapshot, thread_violations, warm_up_intra_op_pool

__all__ = [
    "ALL_CHECKS",
    "Census",
    "Guard",
    "GuardViolation",
    "Integrity",
    "KernelLaunch",
    "ThreadSnapshot",
    "TimingAudit",
    "TorchGlobalState",
    "Violation",
    "bitwise_equal",
    "census_violations",
    "check_outputs",
    "classify_kernel",
    "constant_output_violation",
    "determinism_violations",
    "layout_notes",
    "load_guard",
    "poison_free_cuda_memory",
    "poison_tensor",
    "poisoned_count",
    "poisoned_output_violations",
    "policy_guard",
    "reused_output_violations",
    "roofline_floor_s",
    "speed_violations",
    "thread_violations",
    "warm_up_intra_op_pool",
    "warm_up_profiler",
]
