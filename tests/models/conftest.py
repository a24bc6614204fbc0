"""Fixtures of the models tests (helpers live in model_fixtures.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from model_fixtures import FAMILIES, build_torch_model

ROOT = Path(__file__).resolve().parents[2]
_SHARDED: dict = {}


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: only when a sharding test will really run
def pytest_collection_modifyitems(session, config, items):
    """Start the 8-device subprocess of test_sharding.py as soon as it is known to be needed, so it runs
    while the in-process tests do (it needs a fresh interpreter: XLA_FLAGS must precede jax)."""
    if "proc" in _SHARDED or not any(item.path.name == "test_sharding.py" for item in items):
        return
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


@pytest.fixture(scope="session")
def sharded_report():
    """The JSON report of tests/models/sharded_check.py (8 fake CPU devices)."""
    import json

    proc = _SHARDED.get("proc")
    if proc is None:  # collected without test_sharding.py in the item list (e.g. run directly)
        pytest_collection_modifyitems(None, None, [type("I", (), {"path": Path("test_sharding.py")})()])
        proc = _SHARDED["proc"]
    try:
        stdout, stderr = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("sharded_check.py timed out")
    assert proc.returncode == 0, stderr[-4000:]
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def checkpoint_of(tmp_path_factory):
    """family -> (family, checkpoint dir, torch model), each built once per session."""
    cache: dict = {}

    def get(family: str):
        if family not in cache:
            model = build_torch_model(family)
            path = tmp_path_factory.mktemp(f"hf_{family}")
            model.save_pretrained(path)
            cache[family] = (family, path, model)
        return cache[family]

    return get


@pytest.fixture(scope="session", params=FAMILIES)
def hf_checkpoint(request, checkpoint_of):
    """(family, checkpoint dir, torch model) for each family."""
    return checkpoint_of(request.param)


def pytest_sessionfinish(session, exitstatus):
    proc = _SHARDED.get("proc")
    if proc is not None and proc.poll() is None:  # never left running after the session
        proc.kill()
        proc.communicate()
