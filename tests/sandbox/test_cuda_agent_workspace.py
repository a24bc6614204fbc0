"""CUDA Agent's released workspace layout (``kernels/*.cu`` + ``*_binding.cpp``, ``binding.cpp``,
``binding_registry.h``, ``utils/compile.sh``, ``model_new.py`` importing ``cuda_extension``) judged unchanged.

The fixture (tests/fixtures/cuda_agent_workspace) compiles for real here (pybind11 only, 20-60 s on 2
shared cores: the full builds are ``slow``); CPU mode cannot run CUDA, so a workspace that builds is
``not_run`` and a broken kernel is a ``compile_error`` naming the file and line. On a GPU (``gpu`` marker)
the same workspace runs and is judged ``correct``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernels_env.client import SandboxClient
from kernels_env.judge.build import agent_extension

from .conftest import FAST, cpu_config

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cuda_agent_workspace"
REFERENCE = FIXTURE / "model.py"
BROKEN_LINE = 7  # of kernels/swish.cu, where the test below plants an undeclared identifier


@pytest.fixture(scope="module")
def ws_client(cache_dir):
    with SandboxClient(cpu_config(cache_dir, compile_timeout_s=600)) as sb:
        yield sb


def workspace(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURE, target)
    return target


def test_layouts_are_told_apart(tmp_path):
    layout = agent_extension.detect(FIXTURE)
    assert layout is not None and layout.module == "cuda_extension"
    # CUDA Agent's compile script: root and kernels/ sources, sorted; utils/ is never built
    assert layout.sources == ("binding.cpp", "kernels/swish.cu", "kernels/swish_binding.cpp")
    ours = tmp_path / "ours"  # our own format (docs/sandbox.md): model_new.py + kernels/*.cu, no binding.cpp
    (ours / "kernels").mkdir(parents=True)
    (ours / "model_new.py").write_text("class ModelNew: ...\n")
    (ours / "kernels" / "k.cu").write_text("__global__ void k() {}\n")
    assert agent_extension.detect(ours) is None
    (ours / "binding.cpp").write_text("// a helper without a module definition\n")
    assert agent_extension.detect(ours) is None
    (ours / "binding.cpp").write_text("PYBIND11_MODULE(my_ops, m) {}\n")
    assert agent_extension.detect(ours).module == "my_ops"


@pytest.mark.toolchain  # a full build of the fixture (the broken-kernel test below covers the wiring)
def test_workspace_compiles_and_its_utils_never_run(ws_client, tmp_path):
    """The judge builds cuda_extension itself: the candidate's utils/ scripts never run, and a fake
    ``cuda_extension.py`` in the workspace never stands in for the built module."""
    ws = workspace(tmp_path, "swish_agent")
    marker = tmp_path / "escaped"
    touch = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    (ws / "utils" / "compile.py").write_text(touch)
    (ws / "utils" / "verification.py").write_text(touch)
    (ws / "utils" / "compile.sh").write_text(f"#!/bin/bash\ntouch {marker}\n")
    (ws / "cuda_extension.py").write_text(touch + "def swish_forward(*a):\n    pass\n")
    res = ws_client.evaluate(REFERENCE, ws, FAST)
    assert res["status"] == "not_run", (res["error"], res["messages"])
    assert res["reward"] is None and "cpp_extension" in res["backends"]
    assert not marker.exists()


def test_broken_kernel_is_a_compile_error_naming_file_and_line(ws_client, tmp_path):
    ws = workspace(tmp_path, "swish_broken")
    cu = ws / "kernels" / "swish.cu"
    lines = cu.read_text().splitlines()
    assert "float v = x[i];" in lines[BROKEN_LINE - 1]
    lines[BROKEN_LINE - 1] = "    float v = x[i] + undeclared_offset;"
    cu.write_text("\n".join(lines) + "\n")
    res = ws_client.evaluate(REFERENCE, ws, FAST)
    assert res["status"] == "compile_error" and res["reward"] == -1.0
    errors = [m for m in res["messages"] if m["kind"] == "compiler" and m["severity"] == "error"]
    assert errors, res["messages"]
    assert errors[0]["file"] == "swish_broken/kernels/swish.cu" and errors[0]["line"] == BROKEN_LINE
    assert "undeclared_offset" in errors[0]["message"]
    assert "swish_broken/kernels/swish.cu:7" in res["error"]


def built(cache_dir: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in (cache_dir / "agent_extensions").glob("*/build/*.so")}


@pytest.mark.toolchain
def test_cli_judges_the_workspace_directory(ws_client, cache_dir, tmp_path):
    """``python -m kernels_env evaluate --solution DIR``; the same sources under another name (and other
    utils/) reuse the build an earlier test made (content-addressed): no new or rewritten .so."""
    before = built(cache_dir)
    ws = workspace(tmp_path, "renamed_agent_ws")
    cmd = [sys.executable, "-m", "kernels_env", "evaluate", "--reference", str(REFERENCE), "--solution",
           str(ws), "--device", "cpu", "--cache-dir", str(cache_dir), "--json", "--no-timing"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    result = json.loads(out.stdout)
    assert result["status"] == "not_run", (result["error"], out.stderr[-2000:])
    assert result["solution"] == "renamed_agent_ws"
    after = built(cache_dir)
    assert after, "the workspace's extension was never built"
    if before:  # run after test_workspace_compiles_and_its_utils_never_run: its build is the one found
        assert after == before


@pytest.mark.gpu
def test_workspace_runs_and_is_correct_on_the_gpu(cache_dir, tmp_path):
    from kernels_env.rules.config import JudgeConfig

    with SandboxClient(cpu_config(cache_dir, device="cuda", compile_timeout_s=600)) as sb:
        res = sb.evaluate(REFERENCE, workspace(tmp_path, "swish_gpu"), JudgeConfig(time_candidate=True))
    assert res["status"] == "correct", (res["error"], res["messages"])
    assert res["reward"] >= 1 and res["timings"]["candidate"]["median_ms"] > 0
