"""Degenerate-task audit: flags with reasons, and the CLI entry point."""

from __future__ import annotations

import json
import os

import pytest
import torch

from kernels_env.cli import main as cli
from kernels_env.reports import audit

PROBLEMS = os.path.join(os.path.dirname(__file__), "..", "redteam", "problems")
DEGENERATE = os.path.join(PROBLEMS, "degenerate")


def _flags(name, folder=DEGENERATE):
    report = audit.audit_problem(os.path.join(folder, name + ".py"))
    return report, {(f.kind, f.tolerance) for f in report.flags}


def test_identically_zero_output():
    report, flags = _flags("zero_out")
    assert report.status == "flagged"
    assert (
        ("constant", None) in flags
        and ("zeros_pass", 1e-4) in flags
        and ("insensitive_to_inputs", 1e-4) in flags
    )


def test_zeros_pass_only_at_loose_tolerance():
    _, flags = _flags("tiny_scale")
    assert ("zeros_pass", 1e-2) in flags and ("zeros_pass", 1e-4) not in flags


def test_weight_and_input_blind_problems():
    _, flags = _flags("weight_blind")
    assert ("insensitive_to_weights", 1e-4) in flags and ("constant", None) in flags
    _, flags = _flags("input_blind")
    assert ("insensitive_to_inputs", 1e-4) in flags and ("insensitive_to_weights", 1e-4) not in flags


def test_healthy_problems_are_not_flagged_at_strict_tolerance():
    for name in ("relu", "softmax", "linear_relu", "matmul"):
        _, flags = _flags(name, PROBLEMS)
        assert not {f for f in flags if f[1] in (None, 1e-4)}, (name, flags)
    # ... but a softmax over 64 near-uniform inputs is ~1/64 everywhere: a constant passes at 1e-2 (the
    # KernelBench tolerance of older versions), which is exactly what the audit is for.
    _, flags = _flags("softmax", PROBLEMS)
    assert ("constant_pass", 1e-2) in flags


def test_broken_and_oversized_problems(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x @ x\n"
        "def get_inputs():\n"
        "    return [torch.rand(3, 4)]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    assert audit.audit_problem(str(broken)).status == "error"
    big = audit.audit_problem(os.path.join(PROBLEMS, "relu.py"), max_input_bytes=16)
    assert big.status == "skipped"


@pytest.mark.slow  # ~8 s on 2 loaded cores (tests/_tiers.py)
def test_cli_json_and_table(capsys):
    assert cli(["audit", "--problems", DEGENERATE, "--json", "--seeds", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_name = {p["problem"]: p for p in doc["problems"]}
    assert set(by_name) == {"input_blind.py", "tiny_scale.py", "weight_blind.py", "zero_out.py"}
    assert all(p["status"] == "flagged" for p in by_name.values())
    assert cli(["audit", "--problems", DEGENERATE, "--tolerance", "1e-4"]) == 0
    out = capsys.readouterr().out
    assert "zero_out.py" in out and "4 problems" in out
    assert cli(["audit", "--problems", str(os.path.join(DEGENERATE, "missing_dir"))]) == 2


def test_audit_is_a_subcommand_of_the_sandbox_cli(capsys):
    """``python -m kernels_env audit`` (the CLI registry) runs ``kernels_env.reports.audit``."""
    import json

    from kernels_env.cli import COMMANDS, main

    assert COMMANDS["audit"] == "kernels_env.cli.audit"
    assert main(["audit", "--problems", DEGENERATE, "--json", "--seeds", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    flagged = {p["problem"]: p["status"] for p in doc["problems"]}
    assert flagged and set(flagged.values()) == {"flagged"}, flagged


PROBLEM = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        {body}

def get_inputs():
    return [torch.rand(4, 8)]

def get_init_inputs():
    return []
"""


def _write(folder, name, body):
    (folder / f"{name}.py").write_text(PROBLEM.format(body=body))


def test_run_continues_past_errors_and_oom_and_resumes(tmp_path, capsys):
    problems = tmp_path / "problems"
    problems.mkdir()
    _write(problems, "a_relu", "return torch.relu(x)")
    _write(problems, "b_raises", "raise ValueError('broken reference')")
    _write(problems, "c_oom", "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 64 GiB')")
    _write(problems, "d_zero", "return x * 0")
    out = tmp_path / "audit.jsonl"
    argv = ["audit", "--problems", str(problems), "--out", str(out), "--seeds", "2", "--no-progress"]
    assert cli(argv) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    by_name = {r["problem"]: r for r in lines}
    assert list(by_name) == ["a_relu.py", "b_raises.py", "c_oom.py", "d_zero.py"]  # streamed in order
    assert by_name["b_raises.py"]["status"] == "error" and "broken reference" in str(by_name["b_raises.py"])
    assert "OutOfMemoryError" in by_name["c_oom.py"]["flags"][0]["reason"]
    assert by_name["d_zero.py"]["status"] == "flagged" and by_name["a_relu.py"]["status"] == "ok"
    table = capsys.readouterr().out
    assert "4 problems: 1 ok, 1 flagged, 2 error, 0 skipped" in table
    # Resume: the problems already in the file are not audited again (one new problem is), the summary
    # still covers all of them.
    _write(problems, "e_neg", "return -x")
    out.write_text(out.read_text() + '{"problem": "trunc')  # an interrupted last line is cut off
    assert cli([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["problem"] for p in doc["problems"]] == [*by_name, "e_neg.py"]
    assert len(out.read_text().splitlines()) == 5


def test_streamed_statistics_equal_the_whole_tensor_ones(monkeypatch):
    """The chunked statistics (chunks of 7 elements here) give what whole-tensor float64 math gives."""
    monkeypatch.setattr(audit, "CHUNK", 7)
    torch.manual_seed(0)
    outs = [torch.rand(5, 9) * 3 - 1, torch.rand(13) * 1e-3]
    spread = audit._Spread([1e-4, 1e-2])
    spread.add(outs)
    flat = torch.cat([t.reshape(-1) for t in outs]).double()
    assert spread.stats() == (float(flat.min()), float(flat.max()))
    for tol in (1e-4, 1e-2):
        for c in (0.0, 0.5, float(flat.min()), 1e-3):
            whole = all(torch.allclose(torch.full_like(t.double(), c), t.double(), tol, tol) for t in outs)
            assert spread.passes(c, tol) == whole, (c, tol)
    small = [torch.rand(20) * 1e-3]
    tiny = audit._Spread([1e-4, 1e-2])
    tiny.add(small)
    assert tiny.passes(0.0, 1e-2) and not tiny.passes(0.0, 1e-4)
    other = [outs[0] + 5e-3, outs[1]]
    assert audit._close(outs, other, [1e-4, 1e-2]) == {1e-4: False, 1e-2: True}


def test_the_default_input_budget_comes_from_free_memory_and_a_flag_overrides_it(
    tmp_path, monkeypatch, capsys
):
    from kernels_env.judge.check import memory

    monkeypatch.setattr(memory, "_host_available", lambda: 60 * 2**30)
    assert audit.input_budget("cpu") == 20 * 2**30  # an H200's ~139 GiB free: 46 GiB, above L1 #45's 16 GiB
    problems = tmp_path / "problems"
    problems.mkdir()
    _write(problems, "a_relu", "return torch.relu(x)")  # 4 x 8 float32 inputs: 128 bytes
    monkeypatch.setattr(memory, "_host_available", lambda: 300)  # a third: 100 bytes
    argv = [
        "audit",
        "--problems",
        str(problems),
        "--json",
        "--seeds",
        "1",
        "--no-progress",
        "--device",
        "cpu",
    ]
    assert cli(argv) == 0
    (report,) = json.loads(capsys.readouterr().out)["problems"]
    assert report["status"] == "skipped" and "inputs need" in report["flags"][0]["reason"]
    assert cli([*argv, "--max-input-gb", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["problems"][0]["status"] == "ok"
