"""Fixtures of the rl tests: the 8-device subprocess (tests/rl/sharded_check.py) starts at collection so it
runs while the in-process tests do (it needs a fresh interpreter: XLA_FLAGS must precede jax)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
_SHARDED: dict = {}


def _start():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["PYTHONPATH"] = str(ROOT)
    _SHARDED["proc"] = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("sharded_check.py"))],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    if "proc" not in _SHARDED and any(item.path.name == "test_sharded.py" for item in items):
        _start()


@pytest.fixture(scope="session")
def sharded_report():
    if "proc" not in _SHARDED:
        _start()
    proc = _SHARDED["proc"]
    try:
        stdout, stderr = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("sharded_check.py timed out")
    assert proc.returncode == 0, stderr[-4000:]
    return json.loads(stdout.strip().splitlines()[-1])


def pytest_sessionfinish(session, exitstatus):
    proc = _SHARDED.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.communicate()
