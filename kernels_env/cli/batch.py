"""``batch``: judge a directory of solutions against a directory of problems, resumably, with a summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..reports.batch import run_batch
from ..rules.config import BatchConfig
from .common import add_judge_arguments, add_sandbox_arguments, judge_config, sandbox_config

HELP = "judge a directory of solutions (<problem>[__variant].py or <problem>/ workspaces): JSONL + summary"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--problems", required=True, help="directory of KernelBench-format problem files")
    p.add_argument("--solutions", required=True, help="directory of solutions")
    p.add_argument("--out", required=True, help="results JSONL file (the summary goes next to it)")
    p.add_argument("--no-resume", action="store_true", help="judge all again (default: skip unchanged)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--no-plot", action="store_true")
    add_judge_arguments(p)
    add_sandbox_arguments(p)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    cfg = BatchConfig(
        problems_dir=args.problems,
        solutions_dir=args.solutions,
        out_dir=str(out.parent),
        results_name=out.name,
        summary_name=f"{out.stem}.summary.json",
        plot_name=f"{out.stem}.speedups.png",
        resume=not args.no_resume,
        progress=not args.no_progress,
        plot=not args.no_plot,
        sandbox=sandbox_config(args),
        judge=judge_config(args),
    )
    summary = run_batch(cfg)
    return exit_code(summary)


def exit_code(summary: dict) -> int:
    """0: every solution has a verdict on the candidate; 1: some solution could not be read, or its verdict
    is ``judge_error`` / ``reference_error`` (nothing was said about the candidate: look at them)."""
    no_verdict = sum(v["count"] for v in summary["no_verdict"].values())
    return 1 if summary["errors"] or no_verdict else 0
