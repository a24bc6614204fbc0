"""Materialise an imported solution set into a batch layout and judge it through the sandbox client.

Layout under ``out_dir`` (the same one ``python -m kernels_env batch`` reads, per level):

    problems/levelN/<stem>.py                 symlinks to the checkout's files (never copied)
    solutions/levelN/<stem>__<source>-<id>.py one file per imported solution
    solutions.jsonl                           what each solution file is (record id, source, claims, ...)
    results.jsonl                             one verdict per solution + its key/level/source/claims

``results.jsonl`` is the sandbox's resumable results file (``kernels_env.client.resume_results``): appended
as verdicts land (flushed, fsynced, each printed), keyed by solution key and the content hashes of the
solution and the problem file. A rerun cuts a torn last line, skips what is unchanged and judges again what
was edited (its old line dropped), so an interrupted judge resumes and an edited set is not stale.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
from pathlib import Path
from typing import Any

from kernels_env.client import (
    BrokenReference,
    JudgeConfig,
    SandboxClient,
    SandboxConfig,
    VerdictProgress,
    append_line,
    input_hashes,
    resume_results,
)
from kernels_env.client import read_results as _read_results

from .solution_sets import Solution, SolutionSet

RESULTS, SOLUTIONS = "results.jsonl", "solutions.jsonl"


def materialise(sset: SolutionSet, out_dir: str | Path) -> dict[str, Path]:
    """Write every solution file (and problem symlink); returns solution key -> solution path."""
    out = Path(out_dir)
    paths = {}
    for s in sset.solutions:
        prob = out / "problems" / f"level{s.level}" / s.problem.path.name
        prob.parent.mkdir(parents=True, exist_ok=True)
        if not prob.exists():
            os.symlink(s.problem.path.resolve(), prob)
        sol = out / "solutions" / f"{s.key}.py"
        sol.parent.mkdir(parents=True, exist_ok=True)
        if not sol.exists() or sol.read_text() != s.code:
            sol.write_text(s.code)
        paths[s.key] = sol
    tmp = out / (SOLUTIONS + ".tmp")
    tmp.write_text("".join(json.dumps(s.meta()) + "\n" for s in sset.solutions))
    os.replace(tmp, out / SOLUTIONS)
    return paths


def read_results(path: str | Path) -> dict[str, dict[str, Any]]:
    """Results by solution key; a torn last line (an interrupted write) is cut off the file."""
    return _read_results(Path(path), key="key")


def _record(s: Solution, verdict: dict[str, Any]) -> dict[str, Any]:
    return {
        **verdict,
        "key": s.key,
        "level": s.level,
        "source": s.source,
        "record_id": s.record_id,
        "claimed": s.claimed,
        "reference_matches": s.reference_matches,
    }


def judge_solutions(
    sset: SolutionSet,
    out_dir: str | Path,
    sandbox: SandboxConfig,
    judge: JudgeConfig,
    *,
    resume: bool = True,
    max_in_flight: int = 0,
    progress: bool = True,
    client: SandboxClient | None = None,
) -> list[dict[str, Any]]:
    """Judge every solution of the set without a result in ``out_dir/results.jsonl`` for its current code and
    problem file; returns the results of this set."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = materialise(sset, out)
    results_path = out / RESULTS
    if not resume:
        results_path.unlink(missing_ok=True)
    inputs = {s.key: input_hashes(s.problem.path, paths[s.key]) for s in sset.solutions}
    plan = resume_results(results_path, inputs, key="key")
    if plan.changed or plan.unchanged:
        print(plan.line())
    todo = [s for s in sset.solutions if s.key in plan.todo]
    if todo:
        initial = len(sset.solutions) - len(todo)
        _judge(todo, paths, inputs, results_path, sandbox, judge, max_in_flight, progress, client, initial)
    final = read_results(results_path)
    return [final[s.key] for s in sset.solutions if s.key in final]


def _judge(todo, paths, inputs, results_path, sandbox, judge, max_in_flight, progress, client, initial):
    own = client is None
    client = client or SandboxClient(sandbox, judge)
    limit = max_in_flight or sandbox.default_in_flight()
    bar = VerdictProgress(initial + len(todo), initial, progress)
    queue, pending = list(todo), {}
    try:
        with open(results_path, "a") as f:
            while queue or pending:
                while queue and len(pending) < limit:
                    s = queue.pop(0)
                    fut = client.submit(
                        s.problem.path,
                        paths[s.key],
                        judge,
                        problem=s.problem.stem,
                        solution_name=f"{s.key}.py",
                    )
                    pending[fut] = s
                finished, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for fut in finished:
                    s = pending.pop(fut)
                    try:
                        verdict = fut.result()
                    except BrokenReference as exc:  # the checkout's problem, not the solution's
                        verdict = {
                            "problem": s.problem.stem,
                            "solution": f"{s.key}.py",
                            "status": "reference_error",
                            "error": str(exc),
                            "reward": None,
                            "speedups": {},
                            "timings": None,
                        }
                    append_line(f, _record(s, verdict), inputs[s.key])
                    bar.landed(f"{s.key}.py", verdict)
    except KeyboardInterrupt:
        print(f"\ninterrupted: results so far are in {results_path}; run again to resume", file=sys.stderr)
        raise
    finally:
        bar.close()
        if own:
            client.close()
