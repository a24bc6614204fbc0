"""Fixtures of the tools tests: recorded outputs (CPU-side, real), real GPU outputs once unpacked under
fixtures/real/ (from scripts/gpu_profiler.sh), and small KernelBench-style problems."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = FIXTURES / "recorded"
REAL = FIXTURES / "real"
PROBLEMS = FIXTURES / "problems"

needs_real = pytest.mark.skipif(
    not REAL.is_dir(), reason="real ncu/compute-sanitizer outputs not unpacked yet (scripts/gpu_profiler.sh)"
)


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()
