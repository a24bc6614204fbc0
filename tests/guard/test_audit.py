"""Degenerate-task audit: flags with reasons, and the CLI entry point."""

from __future__ import annotations

import json
import os

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
