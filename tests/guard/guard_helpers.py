"""Shared helper of the guard unit tests (imported by name: tests/guard is on sys.path)."""

from __future__ import annotations

import torch

from kernels_env.guard import GuardViolation, policy_guard


def guarded(fn, policy="strict", *, inputs=(), **options):
    """Run ``fn()`` under the guard; return (output, GuardViolation or None). Census off unless asked."""
    options.setdefault("census", False)
    try:
        with torch.no_grad(), policy_guard(policy, inputs=inputs, **options) as g:
            out = g(fn)
        return out, None
    except GuardViolation as exc:
        return None, exc
