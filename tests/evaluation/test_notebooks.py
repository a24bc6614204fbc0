"""The reproduction notebooks run as scripts on runs the tests make (a CPU-judged solution set, a real audit
of its problems, a real Hydra multirun), and their tables match a direct computation from the run files."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from .conftest import ROOT
from .multirun_app import KEYS


def _notebook(name, *args):
    out = subprocess.run(
        [sys.executable, "-m", f"notebooks.{name}", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _figures(out: Path, stem: str):
    assert (out / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / f"{stem}.pdf").read_bytes()[:4] == b"%PDF"


def _results(run: Path):
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def audited(judged_set, tmp_path_factory):
    cfg, _ = judged_set
    out = tmp_path_factory.mktemp("audit")
    stdout = _notebook("task_audit", cfg.kernelbench_dir, out, "--device=cpu")
    return out, stdout


def test_audit_notebook(audited):
    out, stdout = audited
    audit = json.loads((out / "audit.json").read_text())
    table = json.loads((out / "audit_table.json").read_text())
    reports = audit["problems"]
    assert table["status"] == dict(Counter(r["status"] for r in reports))
    direct = Counter(
        (f["kind"], f["tolerance"])
        for r in reports
        for f in {(f["kind"], f["tolerance"]): f for f in r["flags"]}.values()
    )
    assert table["flags"] == {f"{k}@{t}": n for (k, t), n in direct.items()}
    # the constant problem is degenerate at both tolerances, the others at none
    assert table["degenerate"] == {"0.0001": ["level2/4_zero.py"], "0.01": ["level2/4_zero.py"]}
    assert "4 problems audited on cpu" in stdout
    _figures(out, "audit")


# The test checkout's tasks (tests/evaluation/conftest.py: make_checkout); 5_unsolved has no solution.
TASKS = [("1", "1_relu"), ("2", "3_scale"), ("2", "4_zero"), ("2", "5_unsolved")]


def _pass_rate(results, keep=lambda r: True, level=None):
    """Direct Table 1 arithmetic: each task of the checkout weighs 1 (the mean over its solutions; a task
    without one counts as failed)."""
    per = defaultdict(list)
    for r in results:
        if keep(r):
            per[(str(r["level"]), r["problem"])].append(r["status"] == "correct")
    tasks = [t for t in TASKS if (level is None or t[0] == level) and keep({"problem": t[1], "level": t[0]})]
    return statistics.fmean(statistics.fmean(per[t]) if per[t] else 0.0 for t in tasks)


def test_table1_notebook_full_and_audited(judged_set, audited, tmp_path):
    cfg, _ = judged_set
    run = Path(cfg.out_dir)
    stdout = _notebook("table1_report", run, audited[0] / "audit.json", tmp_path)
    report = json.loads((tmp_path / "table1.json").read_text())
    results = _results(run)
    assert report["full"]["overall"]["pass_rate"] == pytest.approx(_pass_rate(results))
    # the notebook's table over the run's files is the run's own (experiments.solutions' table1.json)
    own = json.loads((run / "table1.json").read_text())["all"]["full"]
    assert report["full"] == own
    for level in ("1", "2"):
        mine = [r for r in results if str(r["level"]) == level]
        assert report["full"]["levels"][level]["pass_rate"] == pytest.approx(_pass_rate(mine, level=level))
        assert report["full"]["levels"][level]["faster_than_compile"] is None  # CPU: not measured
    not_zero = lambda r: r["problem"] != "4_zero"  # noqa: E731
    assert report["audited"]["overall"]["pass_rate"] == pytest.approx(_pass_rate(results, not_zero))
    kept = [r for r in results if r["level"] == 2 and not_zero(r)]
    unsolved = [t for t in TASKS if t[0] == "2" and t[1] not in {r["problem"] for r in results}]
    assert unsolved == [("2", "5_unsolved")]
    # results: the level's rows, a failed one per unsolved task; tasks: distinct (3_scale and 5_unsolved)
    assert report["audited"]["levels"]["2"]["results"] == len(kept) + len(unsolved)
    assert report["audited"]["levels"]["2"]["tasks"] == len({r["problem"] for r in kept}) + len(unsolved) == 2
    assert report["audit"]["excluded"] == {
        "level2/4_zero": ["constant", "zeros_pass@0.0001", "insensitive_to_inputs@0.0001"]
    }
    assert (
        report["labels"]["protocol"] == "kernelbench" and "atol=rtol=0.0001" in report["labels"]["precision"]
    )
    assert "audited subset (1 degenerate tasks left out" in stdout
    _figures(tmp_path, "table1")


def test_claims_notebook(judged_set, tmp_path):
    cfg, _ = judged_set
    run = Path(cfg.out_dir)
    stdout = _notebook("solution_claims", run, 0.8, tmp_path)
    table = json.loads((tmp_path / "claims.json").read_text())
    results = _results(run)
    claims = [(r["source"], mode) for r in results for mode, c in r["claimed"].items() if c is not None]
    assert len(table["rows"]) == len(claims)
    for source, s in table["sources"].items():
        for mode, b in s["baselines"].items():
            assert b["claims"] == claims.count((source, mode))
            statuses = Counter(
                ("rejected:" + r["check"])
                if r["status"] == "rejected"
                else ("timing_not_comparable" if r["status"] == "correct" else r["status"])
                for r in results
                if r["source"] == source and r["claimed"].get(mode) is not None
            )
            assert b["outcomes"] == dict(statuses) and b["survive"] == 0  # CPU: no timing, nothing survives
    assert "import: 7 records, 1 matching no problem, 0 duplicate ids" in stdout
    _figures(tmp_path, "claims")


def test_ablation_notebook(multirun, tmp_path):
    stdout = _notebook("ablation_report", multirun, "ppo", tmp_path)
    table = json.loads((tmp_path / "ablations.json").read_text())
    direct = {}
    for job in multirun.iterdir():
        if not (job / ".hydra").is_dir():
            continue
        ov = dict(line.split("=", 1) for line in job.name.split("_", 1)[1].split(","))
        rows = (
            [json.loads(x) for x in (job / "ppo" / "metrics.jsonl").read_text().splitlines()]
            if (job / "ppo" / "metrics.jsonl").is_file()
            else []
        )
        direct[(ov["ablation"], ov["seed"])] = rows[-1] if rows else None
    got = {(r["ablation"], r["seed"]): r for r in table["rows"]}
    assert set(got) == set(direct)
    for key, last in direct.items():
        if last is None:
            assert got[key]["status"] == "failed" and got[key]["reason"] == "stage ppo did not finish"
        else:
            assert got[key]["status"] == "ok" and [got[key][k] for k in KEYS] == [last[k] for k in KEYS]
    full = [direct[("full", s)]["reward_mean"] for s in ("0", "1")]
    assert table["ablations"]["full"]["reward_mean"]["mean"] == pytest.approx(statistics.fmean(full))
    assert table["ablations"]["full"]["reward_mean"]["std"] == pytest.approx(statistics.stdev(full))
    assert "FAILED no_rft seed 1: stage ppo did not finish" in stdout
    curves = json.loads((tmp_path / "curves_ppo.json").read_text())
    assert len(curves["entropy"]) == 3 and "no_rft seed 1" not in curves["entropy"]
    _figures(tmp_path, "curves_ppo")
    _figures(tmp_path, "ablations_faster_compile")


def test_figures_command_redraws_without_a_notebook(multirun, judged_set, tmp_path):
    cfg, _ = judged_set
    for run, stems in (
        (multirun, ["curves", "ablations_faster_compile"]),
        (Path(cfg.out_dir), ["table1", "claims"]),
    ):
        out = tmp_path / run.name
        done = subprocess.run(
            [sys.executable, "-m", "experiments.figures", f"run_dir={run}", f"out_dir={out}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        for stem in stems:
            _figures(out, stem)
    bad = subprocess.run(
        [sys.executable, "-m", "experiments.figures", f"run_dir={tmp_path / 'none'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: run_dir=")
