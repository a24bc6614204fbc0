"""Shared pytest setup: the test tiers (tests/_tiers.py: integration / e2e assigned at collection, a guard
that keeps the fast tier free of processes), the `gpu` marker skips without a CUDA device, and no test writes
into the checkout's outputs/ or multirun/. Tiny fixtures live in tests/fixtures."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import _tiers
import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
_RUN_DIRS = ("outputs", "multirun")


@functools.cache
def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the tiers are markers
def pytest_collection_modifyitems(config, items):
    _tiers.assign(items)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _guarded(item):
    if not _tiers.in_fast_tier(item):
        return (yield)
    with _tiers.ProcessGuard() as guard:
        try:
            return (yield)
        finally:
            if guard.started:
                pytest.fail(
                    f"{item.nodeid} is in the fast tier but started a process: {guard.started[0]}. "
                    "Use an integration fixture or mark it integration (tests/_tiers.py).",
                    pytrace=False,
                )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guarded(item))


def _run_dirs() -> set[Path]:
    """Hydra run directories in the checkout (<job>/<date>/<time>, a sweep's .../<n>_<overrides>)."""
    return {p.parent for name in _RUN_DIRS for p in (ROOT / name).glob("**/.hydra")}


def pytest_sessionstart(session):
    session.config._run_dirs_before = _run_dirs()


def pytest_sessionfinish(session, exitstatus):
    """Tests write under pytest's tmp paths only: a Hydra run of this session (its overrides name this
    session's tmp paths) that landed in the checkout's outputs/ or multirun/ fails the session. Other runs
    there (the user's, another pytest session's) are left alone."""
    before = getattr(session.config, "_run_dirs_before", None)
    factory = getattr(session.config, "_tmp_path_factory", None)
    if before is None or factory is None:
        return
    base = str(factory.getbasetemp())
    ours = []
    for run in sorted(_run_dirs() - before):
        try:
            text = (run / ".hydra" / "overrides.yaml").read_text()
        except OSError:
            continue
        if base in text:
            ours.append(str(run.relative_to(ROOT)))
    if ours:
        session.config.get_terminal_writer().line(
            f"ERROR: tests wrote Hydra runs into the checkout ({', '.join(ours[:5])}): pass "
            "hydra.run.dir / hydra.sweep.dir under tmp_path",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
