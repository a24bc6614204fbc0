"""Workspace permission rules, size limits, tool calls through an executor, and the fresh final evaluation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernels_env.session import WorkspaceError, WorkspaceLimits, WorkspaceSession

REF = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


@pytest.fixture
def ws(tmp_path):
    ref = tmp_path / "ref.py"
    ref.write_text(REF)
    harness = tmp_path / "verify.py"
    harness.write_text("# harness\n")
    calls = []

    def executor(name, args, limits):
        calls.append((name, args, limits))
        return {"ok": True, "tool": name, "result": {}, "text": "fine", "elapsed_s": 0.0}

    s = WorkspaceSession(
        ref,
        harness_files={"harness/verify.py": harness},
        executor=executor,
        limits=WorkspaceLimits(max_file_bytes=1000, max_total_bytes=3000, max_files=8),
    )
    s.calls = calls
    yield s
    s.close()


def test_layout_and_allowed_writes(ws):
    names = {f["path"]: f["writable"] for f in ws.list_files()}
    assert names == {"model.py": False, "harness/verify.py": False}
    ws.write_file("model_new.py", "class ModelNew: pass\n")
    ws.write_file("kernels/a.cu", "__global__ void k() {}\n")
    ws.write_file("./kernels/sub/b.cuh", "// header\n")
    assert ws.read_file("kernels/a.cu").startswith("__global__")
    assert ws.read_file("model.py") == REF  # protected files are readable


@pytest.mark.parametrize(
    "path",
    [
        "model.py",
        "harness/verify.py",
        "notes.txt",
        "kernels/x.so",
        "kernels/../model.py",
        "../escape.cu",
        "/etc/passwd",
        "kernels/./../../x.cu",
        "",
        "a\x00b",
    ],
)
def test_refused_writes(ws, path):
    with pytest.raises(WorkspaceError):
        ws.write_file(path, "x")


def test_symlinks_cannot_escape(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, ws.root / "kernels" / "link")
    with pytest.raises(WorkspaceError, match="symbolic"):
        ws.write_file("kernels/link/evil.cu", "x")
    assert not (outside / "evil.cu").exists()
    (outside / "secret.txt").write_text("s")
    os.symlink(outside / "secret.txt", ws.root / "kernels" / "s.txt")
    with pytest.raises(WorkspaceError, match="symbolic"):
        ws.read_file("kernels/s.txt")
    with pytest.raises(WorkspaceError, match="symbolic"):
        ws.write_file("kernels/s.txt", "overwrite through the link")
    assert (outside / "secret.txt").read_text() == "s"


def test_size_and_count_limits(ws):
    with pytest.raises(WorkspaceError, match="per-file"):
        ws.write_file("model_new.py", "x" * 1001)
    for i in range(3):
        ws.write_file(f"kernels/k{i}.cu", "x" * 900)
    with pytest.raises(WorkspaceError, match="over the limit"):
        ws.write_file("kernels/k3.cu", "x" * 900)
    ws.write_file("kernels/k0.cu", "small")  # replacing a file counts its new size only
    for i in range(3, 6):
        ws.write_file(f"kernels/t{i}.cu", "y")
    with pytest.raises(WorkspaceError, match="files"):
        ws.write_file("kernels/one_too_many.cu", "z")


def test_tool_calls_use_workspace_paths_and_limits(ws):
    resp = ws.call("profile", '{"mode": "events", "reference": "/etc/passwd", "solution": "/tmp/other"}')
    assert resp["ok"]
    name, args, limits = ws.calls[-1]
    assert args["reference"] == str(ws.root / "model.py") and args["solution"] == str(ws.root)
    assert args["mode"] == "events" and limits == {"time_s": 120.0, "max_output_bytes": 16000}
    bad = ws.call("compile", "{not json")
    assert not bad["ok"] and "not JSON" in bad["error"]
    assert not ws.call("compile", "[1, 2]")["ok"]


def test_protected_files_restored_after_a_tool_tampers(ws):
    def tamper(name, args, limits):
        p = ws.root / "model.py"
        p.chmod(0o644)
        p.write_text("class Model: 'hacked'\n")
        return {"ok": True, "tool": name, "result": {}, "text": ""}

    ws.executor = tamper
    resp = ws.call("compile", {})
    assert "restored" in resp["warnings"][0]
    assert ws.read_file("model.py") == REF


def test_final_evaluation_uses_a_fresh_snapshot_and_the_original_reference(ws):
    ws.write_file("model_new.py", "class ModelNew: pass\n")
    ws.write_file("kernels/a.cu", "// a\n")
    (ws.root / "model.py").chmod(0o644)
    (ws.root / "model.py").write_text("tampered")  # even if the copy on disk changed, the original is judged
    (ws.root / "kernels" / "stray.bin").write_bytes(b"\0")  # not an agent-writable file: not carried over
    seen = {}

    def evaluator(reference, solution):
        seen["ref"] = Path(reference).read_text()
        seen["files"] = sorted(str(p.relative_to(solution)) for p in Path(solution).rglob("*") if p.is_file())
        seen["dir"] = solution
        return {"status": "correct"}

    assert ws.evaluate(evaluator) == {"status": "correct"}
    assert seen["ref"] == REF
    assert seen["files"] == ["kernels/a.cu", "model.py", "model_new.py"]
    assert seen["dir"] != str(ws.root) and not os.path.exists(seen["dir"])
