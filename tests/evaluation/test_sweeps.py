"""A Hydra multirun of ``experiments.evaluate -m +sweep=protocols`` (the real entry point and sweep preset, in
process; the batch itself replaced by one that writes verdicts labelled with the judge settings it was given)
becomes one protocol x policy table and one figure; its job directories are single-level and short although
the command line holds path-valued overrides."""

from __future__ import annotations

import json

import pytest

from research.evaluation import figures, protocol_table
from research.evaluation.figures import make_figures
from tests.hydra_mains import run_main

from .figure_checks import figure_problems

PROBLEMS = ["1_relu", "2_scale", "3_sum"]
# The stand-in judge: problem i is correct unless the policy rejects it (strict rejects 2_scale, kernelbench
# rejects 2_scale and 3_sum; cuda_agent none); the cuda_agent protocol fails 1_relu on its extra inputs.
REJECTS = {"strict": {"2_scale"}, "kernelbench": {"2_scale", "3_sum"}, "cuda_agent": set()}


def _status(protocol: str, policy: str, problem: str) -> str:
    if problem in REJECTS[policy]:
        return "rejected"
    return "incorrect" if (protocol == "cuda_agent" and problem == "1_relu") else "correct"


def _fake_batch(cfg):
    """run_batch's files for BatchConfig ``cfg``: one CPU-mode verdict per problem in results.jsonl."""
    from pathlib import Path

    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    judge = {"protocol": cfg.judge.protocol, "policy": cfg.judge.policy}
    rows = [
        {
            "problem": p,
            "solution": f"{p}.py",
            "level": 1,
            "status": _status(cfg.judge.protocol, cfg.judge.policy, p),
            "speedups": {},
            "timings": {"comparable": False},
            "environment": {"device": "cpu", "torch": "2.9"},
            "judge": judge,
        }
        for p in PROBLEMS
    ]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    base = tmp_path_factory.mktemp("eval_sweep")
    problems, solutions = base / "deep" / "a" / "b" / "problems", base / "deep" / "a" / "b" / "solutions"
    problems.mkdir(parents=True)
    solutions.mkdir()
    for p in PROBLEMS:
        (problems / f"{p}.py").write_text("# a problem\n")
    argv = [
        "evaluate",
        "-m",
        "+sweep=protocols",
        f"eval.problems_dir={problems}",
        f"eval.solutions_dir={solutions}",
        f"hydra.sweep.dir={base / 'sweep'}",
    ]
    mp = pytest.MonkeyPatch()
    mp.setattr("kernels_env.reports.batch.run_batch", _fake_batch)
    try:
        assert run_main("evaluate", argv[1:], mp) is None
    finally:
        mp.undo()
    return base / "sweep"


def test_sweep_job_directories_are_one_short_level(sweep):
    jobs = sorted(d for d in sweep.iterdir() if d.is_dir())
    assert len(jobs) == 6
    for job in jobs:
        assert (job / ".hydra" / "overrides.yaml").is_file() and (job / "results.jsonl").is_file()
        assert not list(job.glob("*.log"))  # nothing was logged: no 0-byte evaluate.log
        # the path-valued overrides (eval.problems_dir, eval.solutions_dir) are left out of the name
        num, _, rest = job.name.partition("_")
        assert num.isdigit() and "/" not in rest and "problems" not in rest and len(job.name) < 60, job.name
        assert sorted(rest.split(",")) == sorted(
            x for x in rest.split(",") if x.startswith(("judge=", "judge.policy="))
        )


def test_protocol_x_policy_table_matches_the_verdicts(sweep):
    table = protocol_table(sweep)
    assert not table["failed"] and len(table["rows"]) == 6
    assert table["protocols"] == ["cuda_agent", "kernelbench"]
    assert table["policies"] == ["cuda_agent", "kernelbench", "strict"]
    for r in table["rows"]:
        statuses = [_status(r["protocol"], r["policy"], p) for p in PROBLEMS]
        assert r["pass_rate"] == pytest.approx(statuses.count("correct") / len(PROBLEMS))
        assert r["faster_than_eager"] is None and r["results"] == 3  # CPU mode: no timings
        assert r["overrides"]["judge"] == r["protocol"] and r["overrides"]["judge.policy"] == r["policy"]


def test_figures_draw_the_sweep_as_one_table_and_one_figure(sweep, tmp_path):
    made = make_figures(sweep, tmp_path)
    assert sorted(p.name for p in made) == ["protocols.pdf", "protocols.png"]
    saved = json.loads((tmp_path / "protocols.json").read_text())
    assert len(saved["rows"]) == 6
    fig = figures.protocols_figure(protocol_table(sweep))
    assert figure_problems(fig) == []
    notes = {ax.get_title(): [t.get_text() for t in ax.texts] for ax in fig.axes}
    assert notes["pass rate"] == [] and "CPU mode" in notes["faster than eager"][0]
    bars = [p.get_height() for p in fig.axes[0].patches]
    assert sorted(bars) == sorted(r["pass_rate"] for r in protocol_table(sweep)["rows"])


WANT = {"judge=kernelbench", "judge.policy=strict"}


def test_a_point_that_never_ran_is_reported(sweep, tmp_path):
    import shutil

    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    gone = next(d for d in copy.iterdir() if d.is_dir() and set(d.name.split("_", 1)[1].split(",")) == WANT)
    shutil.rmtree(gone)
    table = protocol_table(copy)
    (failed,) = table["failed"]
    assert failed["reason"] == "never ran (no job directory)"
    assert failed["overrides"] == {"judge": "kernelbench", "judge.policy": "strict"}
