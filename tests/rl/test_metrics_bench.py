"""Metrics JSONL / truncation on resume / curves, and the PPO update benchmark's CPU smoke mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from research import rl

ROOT = Path(__file__).resolve().parents[2]


def test_metrics_writer_truncates_and_plots(tmp_path):
    w = rl.MetricsWriter(tmp_path, tensorboard=False)
    for s in range(1, 5):
        w.write(s, {"loss": 1.0 / s, "note": "x"})
    w.truncate(2)
    w.write(3, {"loss": 9.0})
    w.close()
    with (tmp_path / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 4, "lo')  # a line cut by a kill
    rows = rl.read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3] and rows[-1]["loss"] == 9.0
    png = rl.plot_curves(tmp_path / "metrics.jsonl", tmp_path / "c.png")
    assert png.stat().st_size > 5_000
    assert rl.plot_curves(tmp_path / "none.jsonl", tmp_path / "d.png") is None


def test_ppo_update_benchmark_smoke(tmp_path):
    out = tmp_path / "ppo.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XLA_FLAGS": "--xla_backend_optimization_level=0"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.models.ppo_update", "--smoke", "--steps", "1", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    ok = [a for a in res["attempts"] if "update_s" in a]
    assert ok and ok[0]["tokens_per_s"] > 0 and 0 < ok[0]["mfu_vs_989"] < 1
    f = ok[0]["flops"]
    assert f["critic"] < f["actor"]  # the critic has no vocabulary product
    # prepare and update compute the same log-probs by two bf16 programs (entropy path vs fused VJP path).
    assert abs(ok[0]["metrics_first"]["ratio_mean"] - 1) < 1e-2
