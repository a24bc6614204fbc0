"""Evaluate a directory of solutions against a directory of KernelBench-format problems.

Solutions map to problems by file stem: ``<problem>.py``, ``<problem>__<variant>.py`` or a workspace
directory ``<problem>/`` (or ``<problem>__<variant>/``) holding ``model_new.py``. Results are appended to a
JSONL file as they finish (``kernels_env.rules.results_file``), each verdict printed as it lands, so an
interrupted batch resumes where it stopped: solutions whose file (or workspace) and reference are unchanged
are skipped, edited ones judged again in place of their old line, and a partial last line is dropped. The
summary (``kernels_env.rules.summary``) is printed, saved as JSON (with the full problem set, so reports over
the run count problems without a solution as failed), and plotted.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..client import SandboxClient
from ..judge.build.sources import input_hashes
from ..rules.config import BatchConfig
from ..rules.results_file import VerdictProgress, append_line, read_results, resume_results
from ..rules.summary import format_summary, plot, summarize


class BatchInputError(ValueError):
    """Nothing to judge (no problems, no solutions, none matching): the user's inputs, one line."""


@dataclass(frozen=True)
class Item:
    problem: str
    problem_path: Path
    solution_path: Path
    key: str  # the solution's name in the solutions directory (unique): what resuming matches on,
    # with the content hashes of the solution and the reference (``rules.results_file``)


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def discover(problems_dir: str | Path, solutions_dir: str | Path) -> tuple[dict[str, Path], list[Item], list]:
    """(problems by stem, items, solution names that match no problem)."""
    pdir, sdir = Path(problems_dir), Path(solutions_dir)
    if not pdir.is_dir():
        raise FileNotFoundError(f"problems directory {pdir} does not exist")
    if not sdir.is_dir():
        raise FileNotFoundError(f"solutions directory {sdir} does not exist")
    problems = {
        p.stem: p
        for p in sorted(pdir.glob("*.py"), key=lambda p: _natural(p.name))
        if not p.name.startswith("_")
    }
    items, unmatched = [], []
    for entry in sorted(sdir.iterdir(), key=lambda p: _natural(p.name)):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_dir():
            if not (entry / "model_new.py").is_file():
                continue
            stem = entry.name
        elif entry.suffix == ".py":
            stem = entry.stem
        else:
            continue
        problem = _match(stem, problems)
        if problem is None:
            unmatched.append(entry.name)
        else:
            items.append(Item(problem, problems[problem], entry, entry.name))
    return problems, items, unmatched


def _match(stem: str, problems: dict[str, Path]) -> str | None:
    if stem in problems:
        return stem
    base = stem.split("__", 1)[0]
    return base if "__" in stem and base in problems else None


def check_inputs(problems: dict[str, Path], items: list[Item], unmatched: list[str], cfg: BatchConfig):
    """A ``BatchInputError`` (one line) when there is nothing to judge: a batch never "succeeds" on it."""
    form = "<problem>.py, <problem>__<variant>.py or a <problem>/ workspace with model_new.py"
    if not problems:
        raise BatchInputError(
            f"no problems in {cfg.problems_dir}: expected KernelBench-format <problem>.py files"
        )
    if not items and not unmatched:
        raise BatchInputError(f"no solutions in {cfg.solutions_dir}: expected {form}")
    if not items:
        shown = ", ".join(unmatched[:5]) + (f" and {len(unmatched) - 5} more" if len(unmatched) > 5 else "")
        raise BatchInputError(
            f"none of the {len(unmatched)} solutions in {cfg.solutions_dir} matches a problem in "
            f"{cfg.problems_dir} (a solution is named {form}): {shown}"
        )


def run_batch(cfg: BatchConfig) -> dict[str, Any]:
    problems, items, unmatched = discover(cfg.problems_dir, cfg.solutions_dir)
    check_inputs(problems, items, unmatched, cfg)  # before anything is written
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results_path = out_dir / cfg.results_name
    for name in unmatched:
        print(f"warning: solution {name} matches no problem in {cfg.problems_dir}", file=sys.stderr)
    if not cfg.resume and results_path.exists():
        results_path.unlink()
    todo, inputs = plan_items(items, results_path)
    keys = {i.key for i in items}
    errors: list[str] = []
    if todo:
        errors = _evaluate_all(cfg, todo, results_path, len(items) - len(todo), inputs)
    results = [r for k, r in read_results(results_path).items() if k in keys]
    summary = summarize(results, problems)
    summary["errors"] = errors
    summary["unmatched_solutions"] = unmatched
    summary["results_file"] = str(results_path)
    # With "problems" (every problem found, solved or not), reports over this run score the same problem set.
    summary["problems_dir"], summary["solutions_dir"] = str(cfg.problems_dir), str(cfg.solutions_dir)
    summary_path = out_dir / cfg.summary_name
    tmp = summary_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    os.replace(tmp, summary_path)
    print(format_summary(summary))
    print(f"results: {results_path}\nsummary: {summary_path}")
    if cfg.plot and results:
        print(f"plot:    {plot(results, summary, str(out_dir / cfg.plot_name))}")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return summary


def plan_items(items: list[Item], results_path: Path) -> tuple[list[Item], dict[str, dict | None]]:
    """(the items to judge, every item's input hashes): an item is skipped only when its record was written
    for the same solution and reference contents; the records of those judged again are dropped first."""
    inputs = {i.key: input_hashes(i.problem_path, i.solution_path) for i in items}
    plan = resume_results(results_path, inputs)
    if plan.changed or plan.unchanged:  # a rerun: say what it does with what is already there
        print(plan.line())
    return [i for i in items if i.key in plan.todo], inputs


def _evaluate_all(
    cfg: BatchConfig, todo: list[Item], results_path: Path, initial: int, inputs: dict[str, dict | None]
) -> list[str]:
    errors: list[str] = []
    bar = VerdictProgress(initial + len(todo), initial, cfg.progress)
    client = SandboxClient(cfg.sandbox, cfg.judge)
    try:
        client.start()
        limit = cfg.max_in_flight or cfg.sandbox.default_in_flight()
        pending: dict[concurrent.futures.Future, Item] = {}
        queue = list(todo)
        with open(results_path, "a") as f:
            while queue or pending:
                while queue and len(pending) < limit:
                    item = queue.pop(0)
                    try:  # sources are read here: a file that cannot be read is this item's error
                        pending[_submit(client, item)] = item
                    except (OSError, ValueError) as exc:
                        errors.append(f"{item.key}: {exc}")
                        bar.skipped()
                if not pending:
                    continue
                finished, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    item = pending.pop(future)
                    result = future.result()  # every request ends in a verdict (SandboxError: none can)
                    append_line(f, result, inputs[item.key])
                    bar.landed(item.key, result)
    except KeyboardInterrupt:
        print(f"\ninterrupted: results so far are in {results_path}; run again to resume", file=sys.stderr)
        raise
    finally:
        bar.close()
        client.close()
    return errors


def _submit(client: SandboxClient, item: Item) -> concurrent.futures.Future:
    return client.submit(item.problem_path, item.solution_path, problem=item.problem, solution_name=item.key)
