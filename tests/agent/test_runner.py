"""The task-set runner and ``python -m experiments.agent``: results.jsonl / trajectories.jsonl /
summary.json with Table 1 per level, resume after interruption, single-turn mode, and clear config errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from research.agent import (
    AgentConfig,
    OpenAIPolicyConfig,
    RunConfig,
    ScriptedPolicyConfig,
    TasksConfig,
    make_policy,
    policy_config,
    read_jsonl,
    run_agent,
)
from research.agent.policies.scripted import ScriptedPolicy
from research.agent.summary import table1

from .conftest import FAST, RELU_PROBLEM, RELU_TRITON, script_file, write_call

ROOT = Path(__file__).resolve().parents[2]


def _tasks(tmp_path) -> Path:
    root = tmp_path / "problems"
    for rel in ("level1/1_relu.py", "level2/2_relu.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(RELU_PROBLEM)
    return root


def test_run_writes_results_trajectories_summary_and_resumes(tmp_path, sandbox):
    root = _tasks(tmp_path)
    script = {"level1/1_relu": [write_call(), {"name": "submit"}], "*": [{"name": "list_files"}]}
    cfg = RunConfig(
        policy=ScriptedPolicyConfig(script="x"),
        agent=AgentConfig(max_turns=3, skills=False, concurrency=2),
        tasks=TasksConfig(problems_dir=str(root)),
        judge=FAST,
        out_dir=str(tmp_path / "out"),
        progress=False,
    )
    summary = run_agent(cfg, policy=ScriptedPolicy(script), client=sandbox)
    out = Path(cfg.out_dir)
    results = {r["task"]: r for r in read_jsonl(out / "results.jsonl")}
    assert (
        results["level1/1_relu"]["status"] == "correct"
        and results["level1/1_relu"]["end_reason"] == "submitted"
    )
    assert results["level2/2_relu"]["status"] == "no_solution" and results["level2/2_relu"]["reward"] == -1
    traj = {t["task"]: t for t in read_jsonl(out / "trajectories.jsonl")}
    assert traj["level1/1_relu"]["messages"][0]["role"] == "system" and traj["level1/1_relu"]["reward"] >= 1
    assert json.loads((out / "summary.json").read_text())["levels"]["1"]["pass_rate"] == 1.0
    assert summary["overall"]["pass_rate"] == 0.5 and summary["levels"]["2"]["pass_rate"] == 0.0
    assert summary["overall"]["faster_than_eager"] is None  # CPU: timings not comparable
    # interrupted run: drop one result (and leave a torn line); the rerun does only that task
    lines = (out / "results.jsonl").read_text().splitlines()
    keep = [ln for ln in lines if "level2" not in ln]
    (out / "results.jsonl").write_text("\n".join(keep) + '\n{"torn')
    calls = []

    class Counting(ScriptedPolicy):
        def start(self, task_id, messages, tools):
            calls.append(task_id)
            return super().start(task_id, messages, tools)

    run_agent(cfg, policy=Counting(script), client=sandbox)
    assert calls == ["level2/2_relu"]
    assert sorted(r["task"] for r in read_jsonl(out / "results.jsonl")) == ["level1/1_relu", "level2/2_relu"]


def test_single_turn_mode_extracts_and_judges_the_code(tmp_path, sandbox):
    class OneShot(ScriptedPolicy):
        def start(self, task_id, messages, tools):
            assert tools == [] and "one ```python code block" in messages[1]["content"]
            ep = super().start(task_id, messages, tools)
            ep.act = lambda m: __import__("research.agent", fromlist=["Action"]).Action(
                text=f"Here it is:\n```python\n{RELU_TRITON}```\n"
            )
            return ep

    cfg = RunConfig(
        agent=AgentConfig(mode="single_turn", skills=False),
        tasks=TasksConfig(problems_dir=str(_tasks(tmp_path) / "level1")),
        judge=FAST,
        out_dir=str(tmp_path / "st"),
        progress=False,
    )
    summary = run_agent(cfg, policy=OneShot([]), client=sandbox)
    (rec,) = read_jsonl(Path(cfg.out_dir) / "results.jsonl")
    assert rec["end_reason"] == "single_turn" and rec["status"] == "correct" and rec["level"] == "1"
    assert summary["overall"]["pass_rate"] == 1.0


def test_table1_columns():
    rs = [
        {"level": "1", "status": "correct", "comparable": True, "speedups": {"eager": 2.0, "compile": 1.02}},
        {"level": "1", "status": "correct", "comparable": True, "speedups": {"eager": 8.0, "compile": 1.5}},
        {"level": "1", "status": "incorrect", "comparable": False, "speedups": {}},
        {"level": "2", "status": "correct", "comparable": True, "speedups": {"eager": 1.0, "compile": 0.5}},
    ]
    t = table1(rs)
    l1 = t["levels"]["1"]
    assert l1["pass_rate"] == pytest.approx(2 / 3)
    assert l1["faster_than_eager"] == pytest.approx(2 / 3) and l1["faster_than_compile"] == pytest.approx(
        1 / 3
    )
    assert l1["geomean_vs_eager"] == pytest.approx(4.0)  # over correct solutions only
    assert t["overall"]["faster_than_compile"] == pytest.approx(1 / 4)


def test_config_errors_are_one_line():
    with pytest.raises(ValueError, match="policy=openai needs policy.model"):
        make_policy(OpenAIPolicyConfig())
    with pytest.raises(ValueError, match="policy must be one of"):
        policy_config("gpt")
    with pytest.raises(FileNotFoundError, match="policy.script=.*: no such file"):
        make_policy(ScriptedPolicyConfig(script="/nonexistent.json"))
    with pytest.raises(ValueError, match="agent.mode must be one of"):
        AgentConfig(mode="multi")


@pytest.mark.integration  # a subprocess or sandbox worker, ~15 s
def test_hydra_entry_point_scripted_cpu(tmp_path):
    root = _tasks(tmp_path)
    script = script_file(tmp_path, [write_call(), {"name": "submit"}])
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "experiments.agent",
        "policy=scripted",
        f"policy.script={script}",
        "sandbox=cpu",
        f"tasks.problems_dir={root / 'level1'}",
        f"out_dir={out}",
        "agent.max_turns=4",
        "agent.skills=false",
        "judge.num_trials=2",
        "judge.families=[]",
        "judge.time_candidate=false",
        "progress=false",
        f"sandbox.cache_dir={tmp_path / 'cache'}",
        "sandbox.num_compile_workers=1",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,) = read_jsonl(out / "results.jsonl")
    assert (
        rec["status"] == "correct"
        and (out / "summary.json").is_file()
        and (out / "trajectories.jsonl").is_file()
    )
    assert "pass" in proc.stdout and "wrote" in proc.stdout
