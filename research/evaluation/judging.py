"""Materialise an imported solution set into a batch layout and judge it through the sandbox client.

Layout under ``out_dir`` (the same one ``python -m kernels_env batch`` reads, per level):

    problems/levelN/<stem>.py                 symlinks to the checkout's files (never copied)
    solutions/levelN/<stem>__<source>-<id>.py one file per imported solution
    solutions.jsonl                           what each solution file is (record id, source, claims, ...)
    results.jsonl                             one verdict per solution + its key/level/source/claims

``results.jsonl`` is appended as verdicts land (flushed, fsynced); a rerun skips keys already in it and cuts
a torn last line first, so an interrupted judge resumes.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
from pathlib import Path
from typing import Any

from kernels_env.client import BrokenReference, JudgeConfig, SandboxClient, SandboxConfig

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
    path = Path(path)
    if not path.is_file():
        return {}
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        path.write_bytes(data)
    done = {}
    for n, line in enumerate(data.decode().splitlines(), 1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            print(f"warning: {path} line {n} is not JSON; skipped", file=sys.stderr)
            continue
        if isinstance(rec, dict) and "key" in rec:
            done[rec["key"]] = rec
    return done


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
    """Judge every solution not yet in ``out_dir/results.jsonl``; returns the results of this set."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = materialise(sset, out)
    results_path = out / RESULTS
    if not resume:
        results_path.unlink(missing_ok=True)
    done = read_results(results_path)
    todo = [s for s in sset.solutions if s.key not in done]
    if todo:
        _judge(todo, paths, results_path, sandbox, judge, max_in_flight, progress, client, len(done))
    final = read_results(results_path)
    return [final[s.key] for s in sset.solutions if s.key in final]


def _judge(todo, paths, results_path, sandbox, judge, max_in_flight, progress, client, initial) -> None:
    from tqdm.auto import tqdm

    own = client is None
    client = client or SandboxClient(sandbox, judge)
    limit = max_in_flight or sandbox.default_in_flight()
    bar = tqdm(
        total=initial + len(todo), initial=initial, disable=not progress, unit="sol", dynamic_ncols=True
    )
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
                    f.write(json.dumps(_record(s, verdict), default=str) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                    bar.set_postfix_str(f"{s.key}: {verdict['status']}", refresh=False)
                    bar.update(1)
    except KeyboardInterrupt:
        print(f"\ninterrupted: results so far are in {results_path}; run again to resume", file=sys.stderr)
        raise
    finally:
        bar.close()
        if own:
            client.close()
