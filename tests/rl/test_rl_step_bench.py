"""benchmarks.rl.rl_step in its --smoke setting (CPU sandbox, tiny model): it runs both schedules end to end
and its JSON is complete and self-consistent (the real numbers come from a GPU run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EPS = 0.05  # s: a verdict's completion time is taken in a done-callback, a moment after result() returns


def test_rl_step_benchmark_smoke(tmp_path):
    out = tmp_path / "rl_step.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XLA_FLAGS": "--xla_backend_optimization_level=0"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.rl.rl_step", "--smoke", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("[rl_step] ") == 7  # one progress line per step: warm-up, 4 overlapped, 2 serial
    res = json.loads(out.read_text())
    assert res["settings"]["smoke"] and res["env"]["date_utc"] and res["stopped_by_budget"] == []
    steps = res["steps"]
    assert [r["phase"] for r in steps["overlapped"]] == ["fill", "steady", "steady", "drain"]
    assert [r["phase"] for r in steps["serial"]] == ["steady", "steady"]
    for row in [r for rows in steps.values() for r in rows]:
        assert row["step_s"] >= (row.get("generate_s") or 0) + (row.get("learn_s") or 0) - 1e-3
        assert 0 <= row["learner_idle_share"] <= 1
        if "judge_wall_s" in row:  # every step but the overlapped pipeline's fill judges
            assert row["judge_wall_s"] > 0 and 0 <= row["judge_hidden_share"] <= 1
            assert row["judge_wait_s"] + row["judge_hidden_s"] <= row["judge_wall_s"] + EPS
            assert row["statuses"] == {"correct": 2} and row["mean_reward"] == 1.0 and not row["dropped"]
    assert all(r["judge_hidden_s"] == 0 for r in steps["serial"])  # nothing runs while serial judges
    assert res["sampler_traces"]["end"] == res["sampler_traces"]["after_warmup"]  # weight syncs: no retrace
    summary = res["summary"]
    for name in ("overlapped", "serial"):
        s = summary[name]
        assert s["steps"] == 2 and s["step_s"] >= s["learn_s"] > 0 and s["generated_tokens_per_s"] > 0
        assert 0 <= s["judge_hidden_share"] <= 1 and s["target_met"] in (None, True, False)
        assert s["gpu"]["samples"] == 0 or 0 <= s["gpu"]["idle_share"] <= 1
    assert summary["overlapped_speedup"] > 0 and "overlapped" in summary["table"]
