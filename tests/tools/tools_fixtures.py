"""Paths and helpers shared by the tools tests (a uniquely named module: several test folders have a
conftest.py, so ``from conftest import ...`` would depend on which one pytest imported first)."""

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
