"""A finished trial leaves nothing for the garbage collector: its tensors are freed when it ends.

On the GPU a task with 16 GiB inputs ran out of memory in trial 2 with 129 GiB held: the guard's thread check
bound its own frame to a local (frame -> locals -> frame), and the guard and its modes refer to each other,
so each trial's inputs and outputs lived on in reference cycles until the next collection. The harness runs
here in a fresh interpreter (the run worker's way: Triton interpreted on CPU) and reports, at the start of
every trial, how many bytes of large tensors exist before any collection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "memory_release"

SCRIPT = r"""
import gc, json, sys, uuid
from pathlib import Path
import torch
from kernels_env.judge.run import enforce
from kernels_env.judge.run import harness
from kernels_env.judge.run import hygiene
from kernels_env.rules.config import JudgeConfig
from kernels_env.rules.messages import EvaluateRequest, Source
from kernels_env.rules.protocols import resolve

device = torch.device("cpu")
hygiene.GLOBAL_STATE = hygiene.GlobalState()  # the run worker's set-up (kernels_env.runtime.worker)
enforce.start_worker(device)
gc.disable()  # no collection may hide a cycle during the run
def live_bytes():
    return sum(o.numel() * o.element_size() for o in gc.get_objects()
               if isinstance(o, torch.Tensor) and o.numel() >= 1 << 20)
seen = {}
def progress(stage, text):
    if text.startswith("trial "):
        seen[text] = live_bytes()
fixtures, workdir = Path(sys.argv[1]), Path(sys.argv[2])
judge = resolve(JudgeConfig(baselines=[], time_candidate=False, families=[]), "cpu")
source = lambda name: Source(name=name, text=(fixtures / name).read_text())
req = EvaluateRequest(id=uuid.uuid4().hex[:8], reference=source("problem.py"), solution=source("solution.py"),
                      workdir=str(workdir), judge=judge, env={})
record = harness.evaluate(req, device, progress)
keys = ("status", "error", "correctness")
print(json.dumps({**{k: record.get(k) for k in keys}, "seen": seen}))
"""


def test_no_trial_leaves_its_tensors_to_the_garbage_collector(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(FIXTURES), str(tmp_path / "work")],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert (report["correctness"] or {}).get("passed") == 5, report  # every trial ran and passed
    assert len(report["seen"]) == 5 and report["seen"]["trial 1/5"] == 0
    assert all(v == 0 for v in report["seen"].values()), report["seen"]  # bytes held by dead tensors
