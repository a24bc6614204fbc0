"""Guard unit tests run in this process; Triton (interpreter mode without a GPU) must see TRITON_INTERPRET
before it is first imported."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from kernels_env.guard import GuardViolation, policy_guard  # noqa: E402


def guarded(fn, policy="strict", *, inputs=(), **options):
    """Run ``fn()`` under the guard; return (output, GuardViolation or None). Census off unless asked."""
    options.setdefault("census", False)
    try:
        with torch.no_grad(), policy_guard(policy, inputs=inputs, **options) as g:
            out = g(fn)
        return out, None
    except GuardViolation as exc:
        return None, exc


@pytest.fixture
def run_guarded():
    return guarded
