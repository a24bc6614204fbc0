"""The tool subcommands pass the tool their files and their own options (in process: the client is a
stand-in, no worker starts)."""

from __future__ import annotations

import pytest

from kernels_env import cli
from kernels_env.cli import tool


class FakeClient:
    calls: list = []

    def __init__(self, config):
        self.config = config

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def tool(self, name, tool_args, limits):
        FakeClient.calls.append((name, tool_args, limits))
        return {"ok": True, "text": "fine"}


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setattr(tool, "SandboxClient", FakeClient)
    FakeClient.calls = []
    ref, sol = tmp_path / "ref.py", tmp_path / "sol.py"
    ref.write_text("class Model: ...\n")
    sol.write_text("class ModelNew: ...\n")
    return str(ref), str(sol)


@pytest.mark.parametrize(
    "argv,name,expected",
    [
        (["compile", "--sass"], "compile", {"solution": "S", "sass": True}),
        (["roofline", "--measured-us", "3"], "roofline", {"reference": "R", "measured_us": 3.0}),
        (
            ["sanitize", "--tools", "memcheck"],
            "sanitize",
            {"reference": "R", "solution": "S", "tools": "memcheck"},
        ),
        (
            ["profile", "--iters", "2"],
            "profile",
            {"reference": "R", "solution": "S", "mode": "auto", "include_reference": True, "iters": 2},
        ),
    ],
)
def test_each_tool_gets_its_files_and_options(files, capsys, argv, name, expected):
    ref, sol = files
    command = argv[0]
    extra = [] if command == "roofline" else ["--solution", sol]
    extra += [] if command == "compile" else ["--reference", ref]
    assert cli.main([*argv, *extra, "--device", "cpu"]) == 0
    (call,) = FakeClient.calls
    swap = {"R": ref, "S": sol}
    assert call[0] == name
    assert call[1] == {k: swap.get(v, v) if isinstance(v, str) else v for k, v in expected.items()}
    assert capsys.readouterr().out.strip() == "fine"
