"""The analysis notebooks run as scripts on a results file, and their curve agrees with the summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kernels_env.rules.summary import P_VALUES, fast_p_curve, summarize

ROOT = Path(__file__).resolve().parents[1]


def _result(problem, status, eager=None, compile_=None):
    return {
        "problem": problem,
        "solution": f"{problem}.py",
        "status": status,
        "reward": 1.0 if status == "correct" else -1.0,
        "timings": {"comparable": True},
        "speedups": {"eager": eager, "compile": compile_},
    }


RESULTS = [
    _result("a", "correct", 2.5, 1.2),
    _result("b", "correct", 1.1, 0.8),
    _result("c", "incorrect"),
    _result("d", "correct", 0.9, 0.5),
]


def test_fast_p_curve_matches_the_summary():
    problems = [r["problem"] for r in RESULTS]
    summary = summarize(RESULTS, problems)
    for mode in ("eager", "compile"):
        curve = fast_p_curve(RESULTS, problems, mode, P_VALUES)
        assert curve == [summary["fast_p"][mode][f"{p:g}"] for p in P_VALUES]
    # hand-computed: 3 of 4 correct; faster than 1x eager: a, b; than 2x: a
    assert fast_p_curve(RESULTS, problems, "eager", [0.0, 1.0, 2.0, 3.0]) == [0.75, 0.5, 0.25, 0.0]


def test_evaluation_report_runs_on_a_results_file(tmp_path):
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RESULTS))
    out = subprocess.run(
        [sys.executable, "-m", "notebooks.evaluation_report", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "4 results on 4 problems" in out.stdout and "incorrect" in out.stdout
    assert (tmp_path / "report_fast_p.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "report_verdicts.png").exists()
