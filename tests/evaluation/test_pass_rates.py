"""One run, one set of pass rates: the batch console, summary.json, the evaluation and Table 1 notebooks and
the figures command print the same labelled numbers for a run (docs/sandbox.md "How a run is scored"),
checked against a hand computation. The run is written by the real batch code path (``run_batch`` resuming a
results file that already holds every verdict, so no sandbox worker starts)."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

from kernels_env.judge.build.sources import input_hashes
from kernels_env.reports.batch import run_batch
from kernels_env.rules.config import BatchConfig
from kernels_env.rules.summary import format_pass_rate
from research.evaluation import load_results, run_tasks, table1_report
from research.evaluation.figures import make_figures

from .conftest import ROOT

H200 = {"device": "cuda", "gpu": "NVIDIA H200", "torch": "2.11.0+cu130"}
JUDGE = {"protocol": "kernelbench", "policy": "cuda_agent", "tolerances": {"float32": [1e-4, 1e-4]}}


def _verdict(solution, status, eager=None, compile_=None, comparable=True):
    return {
        "problem": solution.split("__")[0].removesuffix(".py"),
        "solution": solution,
        "status": status,
        "reward": 3.0 if status == "correct" else -1.0,
        "timings": {"comparable": comparable},
        "speedups": {"eager": eager, "compile": compile_} if status == "correct" else {},
        "environment": H200 if comparable else {"device": "cpu"},
        "judge": JUDGE,
    }


# 5 problems: 1_two has a correct and an incorrect solution, 4_none has none, 5_three has three
VERDICTS = [
    _verdict("1_two__a.py", "correct", 2.0, 1.2),
    _verdict("1_two__b.py", "incorrect"),
    _verdict("2_one.py", "correct", 1.5, 0.9),
    _verdict("3_fail.py", "compile_error"),
    _verdict("5_three__a.py", "correct", 1.1, 1.02),
    _verdict("5_three__b.py", "correct", 3.0, 2.5),
    _verdict("5_three__c.py", "runtime_error"),
]
PROBLEMS = ["1_two", "2_one", "3_fail", "4_none", "5_three"]
# Hand-computed, each problem weighing 1 and 4_none scoring 0:
MEAN = (1 / 2 + 1 + 0 + 0 + 2 / 3) / 5  # per problem, mean over its solutions: 43.3%
BEST = (1 + 1 + 0 + 0 + 1) / 5  # per problem, best of its solutions: 60.0%
PER_SOLUTION = 4 / 7  # 4 of the 7 solutions are correct: 57.1%
FASTER_EAGER = (1 / 2 + 1 + 0 + 0 + 2 / 3) / 5  # >5% faster: 2.0, 1.5, 1.1, 3.0 (every correct one)
FASTER_COMPILE = (1 / 2 + 0 + 0 + 0 + 1 / 3) / 5  # 1.2 and 2.5 (0.9 slower, 1.02 not >5%)
EXPECTED_LINES = [
    "pass rate over 5 problems (each weighs 1; 1 without a solution counts as failed):",
    "   43.3%  per problem, mean of 1-3",
    "   60.0%  per problem, best of 1-3",
    "   57.1%  per solution (4 of 7 judged solutions correct)",
]


def make_run(base: Path, verdicts=VERDICTS, results_name="results.jsonl", summary_name="summary.json"):
    """A batch run over PROBLEMS written by ``run_batch``: the verdicts are already in the results file."""
    problems, solutions = base / "problems", base / "solutions"
    problems.mkdir(parents=True)
    solutions.mkdir()
    for p in PROBLEMS:
        (problems / f"{p}.py").write_text("# a KernelBench-format problem (never judged here)\n")
    for v in verdicts:
        (solutions / v["solution"]).write_text("# a solution (its verdict is in the results file)\n")
    out = base / "run"
    out.mkdir()
    # each record names the contents it judged, so the rerun resumes them all and judges nothing
    hashed = [
        {**v, "inputs_sha256": input_hashes(problems / f"{v['problem']}.py", solutions / v["solution"])}
        for v in verdicts
    ]
    (out / results_name).write_text("".join(json.dumps(v) + "\n" for v in hashed))
    cfg = BatchConfig(
        problems_dir=str(problems),
        solutions_dir=str(solutions),
        out_dir=str(out),
        results_name=results_name,
        summary_name=summary_name,
        plot_name=f"{Path(results_name).stem}.speedups.png",
        progress=False,
    )
    return out, run_batch(cfg)


def run_notebook(name, monkeypatch, capsys, *args):
    """Run a percent-format notebook as a script, in-process; (its globals, its stdout)."""
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", [name, *map(str, args)])
    namespace = runpy.run_path(str(ROOT / "notebooks" / f"{name}.py"), run_name="__main__")
    return namespace, capsys.readouterr().out


def _block(rate):
    return format_pass_rate(rate)


def test_every_report_of_a_run_prints_the_same_labelled_pass_rates(tmp_path, monkeypatch, capsys):
    run, summary = make_run(tmp_path)
    console = capsys.readouterr().out

    # summary.json: the whole problem set, the three rates (hand-computed) with their labels
    saved = json.loads((run / "summary.json").read_text())
    assert saved["problems"] == PROBLEMS and saved["problems_without_solution"] == ["4_none"]
    rate = saved["pass_rate"]
    assert rate["per_problem_mean"] == pytest.approx(MEAN)
    assert rate["per_problem_best_of"] == pytest.approx(BEST)
    assert rate["per_solution"] == pytest.approx(PER_SOLUTION)
    assert (rate["problems"], rate["solutions"], rate["solutions_per_problem"]) == (5, 7, [1, 3])
    assert saved["fast_p"]["eager"]["0"] == rate["per_problem_mean"]
    assert saved["fast_p_best_of"]["compile"]["0"] == rate["per_problem_best_of"]
    assert saved["faster_than"]["eager"] == pytest.approx(FASTER_EAGER)
    assert saved["faster_than"]["compile"] == pytest.approx(FASTER_COMPILE)
    block = _block(rate)
    assert block.splitlines() == EXPECTED_LINES

    # the batch console: the block, and fast_p best-of rows since a problem has several solutions
    assert block in console
    assert "fast_p and faster, per problem, mean of 1-3:" in console
    assert "fast_p, per problem, best of 1-3:" in console

    # the evaluation notebook over the run directory: the same summary, the same block
    nb, out = run_notebook("evaluation_report", monkeypatch, capsys, run)
    assert nb["summary"]["pass_rate"] == rate and nb["summary"]["fast_p"] == saved["fast_p"]
    assert block in out and "5 problems" in out and "4_none" in out and "counts as failed" in out
    assert (run / "report_fast_p.png").read_bytes()[:4] == b"\x89PNG"

    # Table 1 (library, notebook, figures command): the run's 5 problems, the same numbers
    results = load_results(run)
    report = table1_report(results, tasks=run_tasks(run, results))
    overall = report["full"]["overall"]
    assert overall["tasks"] == 5 and overall["pass_rates"] == rate
    assert (overall["pass_rate"], overall["pass_rate_best_of"]) == (rate["per_problem_mean"], BEST)
    assert overall["faster_than_eager"] == saved["faster_than"]["eager"]
    assert overall["faster_than_compile"] == saved["faster_than"]["compile"]
    nb, out = run_notebook("table1_report", monkeypatch, capsys, run, "-", tmp_path / "t1")
    assert nb["report"]["full"] == report["full"] and block in out
    assert "pass: per problem, mean of 1-3; best: per problem, best of 1-3" in out
    assert json.loads((tmp_path / "t1" / "table1.json").read_text())["full"]["overall"]["pass_rate"] == MEAN
    capsys.readouterr()
    made = make_figures(run, tmp_path / "figs")
    assert block in capsys.readouterr().out
    assert tmp_path / "figs" / "table1.png" in made


def test_the_evaluation_report_reads_a_batch_results_file(tmp_path, monkeypatch, capsys):
    # `kernels_env batch --out runs/x.jsonl` writes runs/x.jsonl and runs/x.summary.json
    run, summary = make_run(tmp_path, results_name="x.jsonl", summary_name="x.summary.json")
    nb, out = run_notebook("evaluation_report", monkeypatch, capsys, run / "x.jsonl")
    assert nb["summary"]["pass_rate"] == summary["pass_rate"]
    assert _block(summary["pass_rate"]) in out
    assert (run / "x.report_fast_p.png").read_bytes()[:4] == b"\x89PNG"
    assert (run / "x.report_verdicts.png").is_file()
    # without the summary beside it the problem set is unknown: only problems with results, and it says so
    (run / "x.summary.json").unlink()
    nb, out = run_notebook("evaluation_report", monkeypatch, capsys, run / "x.jsonl")
    assert nb["summary"]["num_problems"] == 4 and "problems without a solution are not known" in out
    # a path that is neither: one line, exit 2
    with pytest.raises(SystemExit) as exc:
        run_notebook("evaluation_report", monkeypatch, capsys, run / "nothing.jsonl")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "nothing.jsonl" in err and len(err.splitlines()) == 1


def test_cpu_mode_report_notes_why_there_is_no_curve(tmp_path, monkeypatch, capsys):
    cpu = [_verdict(v["solution"], v["status"], comparable=False) for v in VERDICTS]
    cpu.append({**_verdict("4_none__cuda.py", "not_run", comparable=False), "reward": None})
    run, summary = make_run(tmp_path, cpu)
    # 4_none's only solution compiled but never ran (not_run): unverified, the problem leaves the set
    assert summary["problems_unverified"] == ["4_none"] and summary["pass_rate"]["problems"] == 4
    assert summary["pass_rate"]["per_problem_mean"] == pytest.approx((1 / 2 + 1 + 0 + 2 / 3) / 4)
    nb, out = run_notebook("evaluation_report", monkeypatch, capsys, run)
    assert "1 with only not_run solutions left out" in out
    texts = [t.get_text() for t in nb["ax"].texts]  # the fast_p axes: a note, not empty axes
    assert any("no fast_p curve" in t and "CPU mode" in t for t in texts)
    results = load_results(run)
    overall = table1_report(results, tasks=run_tasks(run, results))["full"]["overall"]
    assert overall["pass_rates"] == summary["pass_rate"] and overall["tasks"] == 4


def test_summaries_written_before_the_problem_list_still_give_the_problem_set(tmp_path):
    run, _ = make_run(tmp_path)
    saved = json.loads((run / "summary.json").read_text())
    del saved["problems"]  # an older summary: problems_without_solution still names 4_none
    (run / "summary.json").write_text(json.dumps(saved))
    results = load_results(run)
    assert table1_report(results, tasks=run_tasks(run, results))["full"]["overall"]["tasks"] == 5


def test_agent_runs_keep_their_episodes_as_solutions(tmp_path):
    results = [
        {"task": "t1", "problem": "t1", "status": "correct", "end_reason": "submitted", "reward": 1.0},
        # an episode that never submitted is an attempt that failed (reward -1), not a missing task
        {"task": "t2", "problem": "t2", "status": "no_solution", "end_reason": "max_turns", "reward": -1.0},
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    (tmp_path / "summary.json").write_text(json.dumps({"num_tasks": 2, "overall": {}}))  # an agent summary
    assert run_tasks(tmp_path, load_results(tmp_path)) is None
    overall = table1_report(load_results(tmp_path))["full"]["overall"]
    assert overall["pass_rate"] == 0.5 and overall["pass_rate_per_solution"] == 0.5
    assert overall["mean_reward"] == 0.0 and overall["pass_rates"]["solutions"] == 2
