"""The renderer: deterministic sources, clear errors for plans that do not apply, and numerically right
kernels for every toy op under several fusions and tilings (Triton interpreter, against the reference)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from research.toyenv import TOY_OPS, OpCall, RenderError, ToyTask, cpu_size, parse_plan, render_plan

ROOT = Path(__file__).resolve().parents[2]


def _kind(op: str) -> str:
    return TOY_OPS[op].kind


def fused(task: ToyTask, settings: str = "") -> str:
    return "K " + " ".join(task.ops) + (f" {settings}" if settings else "")


def unfused(task: ToyTask) -> str:
    return " ".join(f"K {o}" for o in task.ops)


def test_rendering_is_deterministic(tasks):
    for task in tasks.tasks[:10]:
        for plan in (fused(task), unfused(task)):
            a, b = render_plan(task, plan), render_plan(task, parse_plan(plan))
            assert a == b
            compile(a, "<rendered>", "exec")
        assert render_plan(task, fused(task)) != render_plan(task, unfused(task))


def test_rendered_source_computes_only_with_triton(tasks):
    task = next(t for t in tasks.tasks if any(c.attr for c in t.calls))
    src = render_plan(task, unfused(task))
    forward = src.split("def forward", 1)[1]
    assert "torch.empty_like" in forward or "new_empty" in forward
    for banned in ("torch.softmax", "torch.relu", "F.", "torch.sum", " @ ", ".sum(", ".exp("):
        assert banned not in forward
    for line in task.init_lines:  # the reference's weights are defined the same way
        assert line in src


def _task(*calls: OpCall) -> ToyTask:
    return ToyTask("t", tuple(calls), 4, 8, "train", (), "", ("in_features",), (), 0.0)


def test_render_errors():
    bias = _task(OpCall("relu"), OpCall("add_bias", (), "bias"), OpCall("sum"))
    with pytest.raises(RenderError, match="occurrence 2 of add_bias, but the task has 1 add_bias op"):
        render_plan(bias, "K relu add_bias add_bias K sum")
    with pytest.raises(RenderError, match="the task has 0 scale ops"):
        render_plan(bias, "K scale K sum")
    with pytest.raises(RenderError, match="after a reduction in the same kernel"):
        render_plan(bias, "K sum softmax")
    with pytest.raises(RenderError, match="needs the 2-D tensor"):
        render_plan(bias, "K sum K add_bias")
    with pytest.raises(RenderError, match="needs the 2-D tensor"):
        render_plan(bias, "K sum add_bias")
    with pytest.raises(RenderError, match="a row op needs the 2-D tensor"):
        render_plan(bias, "K sum K softmax")
    with pytest.raises(RenderError, match="one axis"):
        render_plan(bias, "K softmax sum ax0")
    render_plan(bias, "K relu add_bias K sum relu")  # elementwise after a reduction is fine


def _variants(task: ToyTask) -> dict[str, str]:
    has_row = any(_kind(o) != "map" for o in task.ops)
    out = {"unfused": unfused(task), "fused": fused(task, "R4 W2" if has_row else "B64 V4 W8")}
    # split at the first row op: elementwise prefix in its own (vectorised) kernel
    first_row = next((i for i, o in enumerate(task.ops) if _kind(o) != "map"), None)
    if first_row:
        head, tail = task.ops[:first_row], task.ops[first_row:]
        out["split"] = f"K {' '.join(head)} B128 V2 K {' '.join(tail)} R2"
    return out


@pytest.mark.slow  # ~11 s on 2 loaded cores (tests/_tiers.py)
def test_every_op_is_numerically_right_in_several_plans(tasks):
    cases, expected = [], {}
    covered: set[str] = set()
    for task in tasks.tasks:
        for size in ((6, 100), (5, 64)):
            small = task.at_size(*size)
            for name, plan in _variants(small).items():
                cid = f"{task.id}/{size}/{name}"
                cases.append({"id": cid, "reference": small.source, "solution": render_plan(small, plan)})
                expected[cid] = list(small.out_shape)
        covered |= set(task.ops)
    assert covered >= {"relu", "softmax", "log_softmax", "rms_norm"}, covered
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_numerics.py"))],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = [r["id"] for r in results if not r["ok"] or r["shape"] != expected[r["id"]]]
    assert not bad, bad
    assert len(results) == len(cases)


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_all_toy_ops_render_and_match():
    """Each op alone (the task set need not contain every op): single-op tasks built from the library."""
    from research.data.ops import Reject
    from research.toyenv.tasks import ToyTaskConfig, make_task

    cases = []
    for name in sorted(TOY_OPS):
        cfg = ToyTaskConfig(ops=[name], op_count_weights={1: 1.0}, decontam_dir=None)
        task = None
        for j in range(1, 20):
            try:
                task = make_task(cfg, 1, j)
                break
            except Reject:  # a value-domain rule may refuse a draw
                continue
        assert task is not None, name
        small = cpu_size(task).at_size(3, 100)
        for plan in (
            f"K {name}",
            f"K {name} M1 W1",
            f"K {name} {'R2' if _kind(name) != 'map' else 'B32 V8'}",
        ):
            cases.append(
                {"id": f"{name}:{plan}", "reference": small.source, "solution": render_plan(small, plan)}
            )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_numerics.py"))],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    bad = [r["id"] for r in json.loads(proc.stdout.strip().splitlines()[-1]) if not r["ok"]]
    assert not bad, bad
