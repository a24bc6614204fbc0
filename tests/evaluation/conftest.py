"""Fixtures of the evaluation tests: the shared KernelBench checkout (skipped when absent), a tiny checkout of
our own problems, and one small released solution set judged end to end by a CPU sandbox (Triton under the
interpreter) once per session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernels_env.client import JudgeConfig, SandboxConfig
from research.evaluation import ClaimRule, FieldMap, SolutionSetConfig, evaluate_solution_set

ROOT = Path(__file__).resolve().parents[2]
SHARED_KERNELBENCH = ROOT.parent / "shared" / "kernelbench"

RELU = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(300) * 2 - 1]


def get_init_inputs():
    return []
"""

SCALE = RELU.replace("torch.relu(x)", "x * 2.0").replace("torch.rand(300) * 2 - 1", "torch.rand(257)")
ZERO = RELU.replace("torch.relu(x)", "x * 0.0")  # degenerate: the audit flags it (constant output)

_TRITON = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, EXPR, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), BLOCK=128)
        return out
"""
RELU_TRITON = _TRITON.replace("EXPR", "tl.where(x < 0, 0.0, x)")
RELU_WRONG = _TRITON.replace("EXPR", "tl.where(x < 0.25, 0.0, x)")  # wrong for x in [0, 0.25)
SCALE_TRITON = _TRITON.replace("EXPR", "x * 2.0")
ZERO_TRITON = _TRITON.replace("EXPR", "x * 0.0")
SCALE_SYNTAX = SCALE_TRITON.replace("def forward(self, x):", "def forward(self, x)")
SCALE_TORCH = """import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2.0
"""

# Correctness only, 2 trials, no adversarial families: fast on 2 CPU cores.
FAST = JudgeConfig(time_candidate=False, num_trials=2, families=[])

# A released set as JSONL in its own field names (nested level, claims as numbers or "1.5x" strings).
RECORDS = [
    {
        "uid": "a1",
        "system": "sysA",
        "meta": {"level": "level1"},
        "task": "1_relu",
        "src": RELU_TRITON,
        "claims": {"eager": 2.0, "compile": "1.5x"},
    },
    {
        "uid": "a2",
        "system": "sysA",
        "meta": {"level": 1},
        "task": "relu",
        "src": RELU_WRONG,
        "claims": {"eager": 3.0, "compile": None},
    },
    {
        "uid": "b1",
        "system": "sysB",
        "meta": {"level": 2},
        "task": "level2/3_scale.py",
        "src": SCALE_TRITON,
        "claims": {"eager": 1.2},
    },
    {
        "uid": "b2",
        "system": "sysB",
        "meta": {"level": 2},
        "task": "3_scale",
        "src": SCALE_SYNTAX,
        "claims": {"eager": 4.0},
    },
    {
        "uid": "b3",
        "system": "sysB",
        "meta": {"level": 2},
        "task": "3_scale",
        "src": SCALE_TORCH,
        "claims": {"eager": 1.1, "compile": 1.05},
    },
    {
        "uid": "b4",
        "system": "sysB",
        "meta": {"level": 2},
        "task": "4_zero",
        "src": ZERO_TRITON,
        "claims": {"eager": 5.0},
    },
    {
        "uid": "c1",
        "system": "sysC",
        "meta": {"level": 3},
        "task": "9_missing",
        "src": SCALE_TRITON,
        "claims": {"eager": 9.0},
    },
]
MAPPING = FieldMap(
    code="src",
    level="meta.level",
    problem_id=None,
    problem_name="task",
    id="uid",
    source="system",
    claimed_speedup_eager="claims.eager",
    claimed_speedup_compile="claims.compile",
)


def make_checkout(root: Path) -> Path:
    (root / "level1").mkdir(parents=True)
    (root / "level2").mkdir()
    (root / "level1" / "1_relu.py").write_text(RELU)
    (root / "level2" / "3_scale.py").write_text(SCALE)
    (root / "level2" / "4_zero.py").write_text(ZERO)
    # a task no record solves: every Table 1 drawn from a run counts it as failed (shares of ALL tasks)
    (root / "level2" / "5_unsolved.py").write_text(SCALE)
    return root


@pytest.fixture()
def kernelbench_dir() -> Path:
    if not (SHARED_KERNELBENCH / "level1").is_dir():
        pytest.skip(f"no KernelBench checkout at {SHARED_KERNELBENCH}")
    return SHARED_KERNELBENCH


def cpu_sandbox(cache: Path) -> SandboxConfig:
    return SandboxConfig(
        device="cpu",
        cache_dir=str(cache),
        num_compile_workers=1,
        compile_timeout_s=120,
        run_timeout_s=120,
        memory_limit_gb=4.0,
        startup_timeout_s=240,
        standby_run_workers=False,
    )


@pytest.fixture(scope="session")
def judged_set(tmp_path_factory):
    """(config, report) of the RECORDS set judged into a fresh out_dir."""
    base = tmp_path_factory.mktemp("judged_set")
    checkout = make_checkout(base / "kb")
    (base / "set.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    cfg = SolutionSetConfig(
        input=str(base / "set.jsonl"),
        out_dir=str(base / "out"),
        fields=MAPPING,
        kernelbench_dir=str(checkout),
        claims=ClaimRule(),
        progress=False,
        sandbox=cpu_sandbox(base / "cache"),
        judge=FAST,
    )
    return cfg, evaluate_solution_set(cfg)


@pytest.fixture(scope="session")
def multirun(tmp_path_factory):
    """A real Hydra multirun (basic launcher) of the stand-in app: 2 ablations x 2 seeds, one crashes."""
    sweep = tmp_path_factory.mktemp("multirun") / "sweep"
    app = Path(__file__).with_name("multirun_app.py")
    cmd = [sys.executable, str(app), "-m", "ablation=full,no_rft", "seed=0,1", f"hydra.sweep.dir={sweep}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "critic diverged" in out.stderr  # Hydra raises the failed job's error
    return sweep
