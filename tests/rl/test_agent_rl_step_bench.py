"""benchmarks/rl/agent_rl_step.py's CPU smoke mode: one env=agent RL step end to end (the real agent loop and
CPU sandbox -> trajectories -> packed batch -> PPO update -> weights swapped), every phase timed; and its
one-line error for a missing problems directory."""

import json

import pytest

from benchmarks.rl import agent_rl_step
from tests.rl.agent_fixtures import write_problems


@pytest.mark.slow
def test_agent_rl_step_smoke(tmp_path):
    problems = write_problems(tmp_path / "problems", n=2)
    out = tmp_path / "r.json"
    res = agent_rl_step.main([
        "--problems", str(problems), "--smoke", "--tasks", "2", "--group", "2", "--steps", "2",
        "--turn-tokens", "16", "--micro-batches", "2", "--out", str(out), "--run-dir", str(tmp_path / "run"),
    ])
    saved = json.loads(out.read_text())
    assert saved["rows"] == res["rows"] and len(res["rows"]) == 2
    for row in res["rows"]:
        assert row["episodes"] == 4
        assert row["learn_s"] > 0 and row["generate_s"] > 0 and row["weight_swap_s"] >= 0
        assert row["step_s"] >= row["rollout_s"] + row["learn_s"]
        assert row["statuses"] and "?" not in row["statuses"]  # every episode has a judged verdict
    assert set(res["median"]) >= {"step_s", "learn_s", "generate_s", "rollout_s"}
    assert not any(p.name.startswith("agent_rl_step_") for p in tmp_path.iterdir())  # run dir where asked


def test_missing_problems_dir_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="--problems .*: not a directory"):
        agent_rl_step.main(["--problems", str(tmp_path / "no"), "--smoke", "--out", str(tmp_path / "r.json")])
