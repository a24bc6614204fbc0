"""CUDA Agent's Table 1 for any result set: per level and overall, pass rate, faster than eager / compile
(/ max-autotune) as shares of ALL tasks (">5% faster"), geomean speedups over correct solutions; on the full
set and on the subset the degenerate-task audit leaves; labelled with GPU, torch, protocol, policy and
precision.

Result sets: ``python -m kernels_env batch`` / ``experiments.evaluate`` / ``experiments.solutions``
``results.jsonl`` (sandbox verdicts) and ``experiments.agent`` ``results.jsonl`` (episode results; their
labels come from the verdicts in ``trajectories.jsonl`` beside it). The arithmetic is the sandbox's
(``kernels_env.client.summarize``) through ``research.agent.summary.table1``; nothing is recomputed here.
Shares are over the run's whole problem set (``run_tasks``: a solution-set run's checkout, or the problem set
a batch recorded in its summary), so the table of a run agrees with the run's own summary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kernels_env.client import NO_SOLUTION, format_pass_rate, problem_set, read_batch_summary
from research.agent.summary import MISSING
from research.agent.summary import table1 as _table1

from .audit import Audit
from .kernelbench import KernelBenchNotFound, ProblemIndex
from .labels import fp32_tolerance, labels, level_label

MODES = ("eager", "compile", "max-autotune")
_LEVEL = re.compile(r"level[_\- ]?(\d+)", re.I)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line of an interrupted run
            continue
    return out


def is_agent_result(r: dict[str, Any]) -> bool:
    return "task" in r and "end_reason" in r


def load_results(path: str | Path, level: str | int | None = None) -> list[dict[str, Any]]:
    """The records of a results.jsonl (or a run directory holding one). Agent results get their verdict's
    ``environment`` and ``judge`` from ``trajectories.jsonl``; ``level`` fills results that carry none."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no results file at {path}")
    results = _jsonl(path)
    traj = path.parent / "trajectories.jsonl"
    if any(is_agent_result(r) for r in results) and traj.is_file():
        verdicts = {t.get("task"): t.get("verdict") or {} for t in _jsonl(traj)}
        for r in results:
            v = verdicts.get(r.get("task"), {})
            r.setdefault("environment", v.get("environment"))
            r.setdefault("judge", v.get("judge"))
    if level is not None:
        for r in results:
            r.setdefault("level", level)
    return results


def _level(r: dict[str, Any]) -> str:
    if r.get("level") not in (None, ""):
        m = _LEVEL.search(str(r["level"]))
        return m.group(1) if m else str(r["level"])
    m = _LEVEL.search(str(r.get("task") or r.get("key") or r.get("solution") or ""))
    return m.group(1) if m else "all"


def task_row(r: dict[str, Any]) -> dict[str, Any]:
    """A batch verdict or an agent result in the shape ``research.agent.summary.table1`` reads."""
    level = _level(r)
    if is_agent_result(r):
        return {**r, "level": level}
    problem = str(r.get("problem"))
    return {
        "task": problem if level == "all" else f"level{level}/{problem}",
        "level": level,
        "status": r.get("status"),
        "reward": r.get("reward"),
        "speedups": r.get("speedups") or {},
        "comparable": bool((r.get("timings") or {}).get("comparable")),
        "speed_of_light": (r.get("timings") or {}).get("speed_of_light"),
        "end_reason": None,
        MISSING: bool(r.get(MISSING)),
    }


def _clean(table: dict[str, Any], agent: bool) -> dict[str, Any]:
    if not agent:
        for row in [table["overall"], *table["levels"].values()]:
            row.pop("end_reasons", None)
    return table


def missing_tasks(results: list[dict[str, Any]], tasks: list[tuple[int | str, str]]) -> list[dict[str, Any]]:
    """``no_solution`` results for the (level, problem stem) tasks that ``results`` has nothing for: Table 1's
    shares are over ALL tasks, so a task without a solution counts as failed (KernelBench, CUDA Agent)."""
    have = {(_level(r), str(r.get("problem"))) for r in results}
    return [
        {
            "problem": stem,
            "level": str(level),
            "status": NO_SOLUTION,
            "reward": None,
            "speedups": {},
            MISSING: True,
        }
        for level, stem in tasks
        if (str(level), stem) not in have
    ]


def run_tasks(run: str | Path, results: list[dict[str, Any]]) -> list[tuple[int | str, str]] | None:
    """Every task of a run (a directory or its results file), so a table drawn from the run's files agrees
    with the run's own: a solution-set run (``experiments.solutions``): the tasks of the checkout it was
    matched against, at the levels its results cover (what ``evaluate_solution_set`` counts missing tasks
    from); a batch run (``experiments.evaluate``, ``kernels_env batch``): the problem set its summary
    recorded, at its results' level. None: neither (an agent run), or the checkout is gone."""
    path = Path(run)
    results_path = path / "results.jsonl" if path.is_dir() else path
    try:
        root = json.loads((results_path.parent / "import.json").read_text()).get("kernelbench")
        index = ProblemIndex(root) if root else None
    except (OSError, ValueError, AttributeError, KernelBenchNotFound):
        index = None
    if index is not None:
        return index.tasks_at({_level(r) for r in results})
    found = read_batch_summary(results_path)
    if found is None or any(is_agent_result(r) for r in results):
        return None
    levels = {str(r.get("problem")): _level(r) for r in results}
    only = set(levels.values())
    default = only.pop() if len(only) == 1 else "all"  # a problem without a result: the run's one level
    return [(levels.get(p, default), p) for p in problem_set(found[1], results)]


def table1_report(
    results: list[dict[str, Any]],
    audit: Audit | None = None,
    modes: tuple[str, ...] = MODES,
    tasks: list[tuple[int | str, str]] | None = None,
) -> dict[str, Any]:
    """{"labels", "full": Table 1, "audited": Table 1 on the audit's subset | None, "audit": what it left
    out and why, which problems it did not cover}. ``tasks``: every (level, problem stem) of the benchmark;
    those without a result count as failed (``no_solution``)."""
    if tasks:
        results = list(results) + missing_tasks(results, tasks)
    rows = [task_row(r) for r in results]
    agent = any(is_agent_result(r) for r in results)
    out: dict[str, Any] = {
        "kind": "agent" if agent else "batch",
        "labels": labels(results),
        "full": _clean(_table1(rows, modes), agent),
        "audited": None,
        "audit": None,
    }
    if audit is not None:
        tol = fp32_tolerance(results)
        excluded, unaudited, keep = {}, set(), []
        for r, row in zip(results, rows):
            problem = r.get("problem") or Path(str(row["task"])).name
            flags = audit.degenerate(row["level"], problem, tol)
            if audit.report(row["level"], problem) is None:
                unaudited.add(row["task"])
            if flags:
                excluded[row["task"]] = flags
            else:
                keep.append(row)
        out["audited"] = _clean(_table1(keep, modes), agent)
        out["audit"] = {
            "path": audit.path,
            "tolerance": tol,
            "excluded": dict(sorted(excluded.items())),
            "not_in_audit": sorted(unaudited),
        }
    return out


def format_table1_report(report: dict[str, Any]) -> str:
    fmt = lambda v: "n/a" if v is None else f"{v:.1%}"  # noqa: E731
    gm = lambda v: "n/a" if v is None else f"{v:.2f}x"  # noqa: E731
    lab = report["labels"]
    modes = [m for m in MODES if f"faster_than_{m}" in report["full"]["overall"]]
    lines = ["labels: " + "; ".join(f"{k} {v}" for k, v in lab.items() if k != "mixed")]
    if lab.get("mixed"):
        lines.append(
            "WARNING: mixed " + ", ".join(lab["mixed"]) + " in one table: do not compare these numbers"
        )
    for name in ("full", "audited"):
        table = report[name]
        if table is None:
            continue
        if name == "audited":
            a = report["audit"]
            lines.append(
                f"\naudited subset ({len(a['excluded'])} degenerate tasks left out at fp32 tolerance "
                f"{a['tolerance']}; {len(a['not_in_audit'])} not in the audit)"
            )
        rates = table["overall"]["pass_rates"]
        best = rates["solutions_per_problem"][1] > 1  # else best-of is the mean
        lab = rates["labels"]
        lines.append(
            f"pass: {lab['per_problem_mean']}" + (f"; best: {lab['per_problem_best_of']}" if best else "")
        )
        head = f"{'subset':<9}{'tasks':>6}{'pass':>8}" + (f"{'best':>8}" if best else "")
        head += "".join(f"{'>' + m[:8]:>10}" for m in modes) + "".join(f"{'gm ' + m[:7]:>11}" for m in modes)
        head += f"{'SoL med':>9}{'SoL gm':>8}"  # % of the roofline floor's time (floor / candidate time)
        lines.append(head)
        for key, row in [("overall", table["overall"]), *table["levels"].items()]:
            label = level_label(key)
            line = f"{label:<9}{row['tasks']:>6}{fmt(row['pass_rate']):>8}"
            line += f"{fmt(row['pass_rate_best_of']):>8}" if best else ""
            line += "".join(f"{fmt(row[f'faster_than_{m}']):>10}" for m in modes)
            line += "".join(f"{gm(row[f'geomean_vs_{m}']):>11}" for m in modes)
            line += f"{fmt(row['speed_of_light_median']):>9}{fmt(row['speed_of_light_geomean']):>8}"
            lines.append(line)
        why = table["overall"]["speed_of_light_reason"]
        if why:
            lines.append(f"speed of light (SoL): n/a: {why}")
        lines.append(format_pass_rate(rates))
    return "\n".join(lines)
