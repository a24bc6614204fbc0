"""Fixtures of the rl tests: the 8-device subprocesses (tests/rl/sharded_check.py, pipeline_mesh_check.py)
start at collection so they run while the in-process tests do (a fresh interpreter: XLA_FLAGS must precede
jax)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SHARDED: dict = {}
# test module -> the 8-device script whose JSON report it reads
SCRIPTS = {"test_sharded.py": "sharded_check.py", "test_pipeline_mesh.py": "pipeline_mesh_check.py"}


def _start(script):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["PYTHONPATH"] = str(ROOT)
    _SHARDED[script] = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name(script))],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    names = {item.path.name for item in items}
    for test, script in SCRIPTS.items():
        if script not in _SHARDED and test in names:
            _start(script)


def _report(script):
    if script not in _SHARDED:
        _start(script)
    proc = _SHARDED[script]
    try:
        stdout, stderr = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{script} timed out")
    assert proc.returncode == 0, stderr[-4000:]
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def sharded_report():
    return _report("sharded_check.py")


@pytest.fixture(scope="session")
def pipeline_mesh_report():
    return _report("pipeline_mesh_check.py")


def pytest_sessionfinish(session, exitstatus):
    for proc in _SHARDED.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
