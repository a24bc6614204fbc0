"""KernelBench-style summary of many results: fast_p, shares faster than each baseline, geomean and median
speedups, status counts, the pass rates; plus the speedup plot. The one place a run is scored (docs/sandbox.md
"How a run is scored"): every report (batch console and summary.json, the notebooks, Table 1, figures)
takes its numbers from ``summarize`` and prints them with ``format_pass_rate``.

fast_p (KernelBench): the share of ALL problems whose solution is correct AND more than p times faster than
the baseline; a problem without a result counts as a failure. With several solutions per problem (samples
``<stem>__<variant>``), each problem weighs 1 and contributes the mean over its solutions (the expected
single-sample fast_p); ``best_of`` uses the best solution per problem instead. ``pass_rate`` holds fast_0
both ways plus the share of correct solutions ("per solution"), with their labels. Faster-than shares use
CUDA Agent's ">5% faster" rule. Geomean and median speedups are over correct solutions with a speedup.
``not_run`` results (CPU mode: compiled, never executed) are unverified: they are left out of every share, and
a problem whose solutions are all ``not_run`` leaves the denominator (listed as ``problems_unverified``).

``judge_error``, ``reference_error``, what this machine cannot judge (``insufficient_memory``,
``toolchain_missing``) and a sandbox that was not reached (``infra_error``, a verdict made outside the judge)
are not the candidate's failures, yet a problem they hit has no
verified fast solution: fast_p stays KernelBench's "over all problems" and scores them 0, as KernelBench
scores a missing result (so fast_p is never inflated by the judge's failures), and the summary counts them
apart (``no_verdict``: how many, on which problems) next to the candidates' own failures
(``candidate_failures``), so a reader can tell a weak solution set from a broken judge or problem set.
"""

from __future__ import annotations

import functools
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import speed_of_light
from .result import FAILURES, NO_VERDICT, NOT_RUN
from .rewards import faster

P_VALUES = (0.0, 1.0, 1.5, 2.0)


def _fast(result: Mapping[str, Any], p: float, mode: str) -> float | None:
    if result.get("status") != "correct":
        return 0.0
    if p == 0.0:
        return 1.0
    if not (result.get("timings") or {}).get("comparable"):
        return None  # correct, but no comparable timing (CPU mode): unknown
    s = (result.get("speedups") or {}).get(mode)
    return float(s is not None and s > p)  # a failed baseline never counts as faster


def _share(per_problem: Mapping[str, list], problems: Iterable[str], score, best: bool) -> float | None:
    problems = list(problems)
    if not problems:
        return None
    total = 0.0
    for name in problems:
        scores = [score(r) for r in per_problem.get(name, [])]
        if any(v is None for v in scores):
            return None  # a correct result without a comparable timing: the share is unknown
        if scores:
            total += max(scores) if best else statistics.fmean(scores)
    return total / len(problems)


def summarize(results: list[Mapping[str, Any]], problems: Iterable[str]) -> dict[str, Any]:
    problems = sorted(set(problems) | {r["problem"] for r in results})
    unverified = sorted(
        {r["problem"] for r in results} - {r["problem"] for r in results if r["status"] != "not_run"}
    )
    counts = Counter(r["status"] for r in results)
    results = [r for r in results if r["status"] != "not_run"]
    problems = [p for p in problems if p not in unverified]
    per_problem: dict[str, list] = defaultdict(list)
    for r in results:
        per_problem[r["problem"]].append(r)
    modes = sorted({m for r in results for m in (r.get("speedups") or {})}, key=_mode_order)
    correct = [r for r in results if r["status"] == "correct"]
    comparable = any((r.get("timings") or {}).get("comparable") for r in results)
    out: dict[str, Any] = {
        "num_problems": len(problems),
        "num_solutions": sum(counts.values()),
        "problems": sorted([*problems, *unverified], key=_natural),  # the problem set, recorded for reports
        "problems_without_solution": sorted(p for p in problems if p not in per_problem),
        "problems_unverified": unverified,
        "status_counts": dict(counts),
        "candidate_failures": sum(counts[k] for k in FAILURES),
        "no_verdict": _no_verdict(results),
        "comparable": comparable,
        "timings_missing": None if comparable else _timings_missing(results),
        "fast_p": {},
        "fast_p_best_of": {},
        "faster_than": {},
        "geomean_speedup": {},
        "median_speedup": {},
        "mean_reward": _mean([r["reward"] for r in results if r.get("reward") is not None]),
        # achieved fraction of the roofline floor (floor / candidate time), next to the speedups
        "speed_of_light": speed_of_light.summarize(results),
        "pass_rate": _pass_rate(per_problem, problems, results, len(unverified)),
    }
    for mode in modes or ["eager"]:
        for key, best in (("fast_p", False), ("fast_p_best_of", True)):
            out[key][mode] = {
                _p(p): _share(per_problem, problems, functools.partial(_fast, p=p, mode=mode), best)
                for p in P_VALUES
            }
        faster_score = functools.partial(_faster_score, mode=mode)
        out["faster_than"][mode] = _share(per_problem, problems, faster_score, False)
        speeds = [r["speedups"][mode] for r in correct if (r.get("speedups") or {}).get(mode)]
        geomean = math.exp(statistics.fmean(math.log(s) for s in speeds)) if speeds else None
        out["geomean_speedup"][mode] = geomean
        out["median_speedup"][mode] = statistics.median(speeds) if speeds else None
    return out


def fast_p_curve(
    results: list[Mapping[str, Any]],
    problems: Iterable[str],
    mode: str,
    ps: Iterable[float],
    best: bool = False,
) -> list[float | None]:
    """fast_p at each p in ``ps`` (same rules as ``summarize``): the curve papers plot against p."""
    problems = sorted(set(problems) | {r["problem"] for r in results})
    verified = {r["problem"] for r in results if r["status"] != "not_run"}
    problems = [p for p in problems if p in verified or p not in {r["problem"] for r in results}]
    per_problem: dict[str, list] = defaultdict(list)
    for r in results:
        if r["status"] != "not_run":
            per_problem[r["problem"]].append(r)
    return [_share(per_problem, problems, functools.partial(_fast, p=p, mode=mode), best) for p in ps]


def _pass_rate(
    per_problem: Mapping[str, list], problems: list[str], results: list, unverified: int
) -> dict[str, Any]:
    """fast_0 per problem (mean over its solutions and best of them; each problem weighs 1, one without a
    solution scores 0) and per solution (correct / judged solutions), with the labels every report prints."""
    correct = functools.partial(_fast, p=0.0, mode="eager")  # p = 0: never None
    sizes = [len(per_problem[p]) for p in problems if per_problem.get(p)]
    lo, hi = (min(sizes), max(sizes)) if sizes else (0, 0)
    n = str(hi) if lo == hi else f"{lo}-{hi}"
    right = sum(r["status"] == "correct" for r in results)
    return {
        "problems": len(problems),
        "without_solution": sum(1 for p in problems if not per_problem.get(p)),
        "unverified": unverified,
        "solutions": len(results),
        "correct_solutions": right,
        "solutions_per_problem": [lo, hi],
        "per_problem_mean": _share(per_problem, problems, correct, False),
        "per_problem_best_of": _share(per_problem, problems, correct, True),
        "per_solution": right / len(results) if results else None,
        "labels": {
            "per_problem_mean": f"per problem, mean of {n}",
            "per_problem_best_of": f"per problem, best of {n}",
            "per_solution": "per solution",
        },
    }


def format_pass_rate(rate: Mapping[str, Any]) -> str:
    """The pass rates of ``summarize(...)["pass_rate"]`` as every report prints them (best-of only when some
    problem has more than one solution: otherwise it is the mean)."""
    pct = lambda v: "n/a" if v is None else f"{v:.1%}"  # noqa: E731
    lab = rate["labels"]
    head = f"pass rate over {rate['problems']} problems (each weighs 1"
    if rate["without_solution"]:
        n = rate["without_solution"]
        head += f"; {n} without a solution {'counts' if n == 1 else 'count'} as failed"
    if rate["unverified"]:
        head += f"; {rate['unverified']} with only not_run solutions left out"
    lines = [head + "):", f"  {pct(rate['per_problem_mean']):>6}  {lab['per_problem_mean']}"]
    if rate["solutions_per_problem"][1] > 1:
        lines.append(f"  {pct(rate['per_problem_best_of']):>6}  {lab['per_problem_best_of']}")
    lines.append(
        f"  {pct(rate['per_solution']):>6}  {lab['per_solution']} "
        f"({rate['correct_solutions']} of {rate['solutions']} judged solutions correct)"
    )
    return "\n".join(lines)


def read_batch_summary(results_path: str | Path) -> tuple[Path, dict[str, Any]] | None:
    """(path, summary) a batch wrote beside its results file: ``<stem>.summary.json`` (``kernels_env batch
    --out runs/x.jsonl``) or ``summary.json`` (``experiments.evaluate``'s run directory). None when there is
    none, it is not a batch summary (an agent run's summary.json) or it names another results file."""
    path = Path(results_path)
    for cand in (path.with_name(f"{path.stem}.summary.json"), path.with_name("summary.json")):
        try:
            data = json.loads(cand.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "problems_without_solution" not in data:
            continue
        if data.get("results_file") and Path(data["results_file"]).name != path.name:
            continue
        return cand, data
    return None


def problem_set(summary: Mapping[str, Any] | None, results: list[Mapping[str, Any]]) -> list[str]:
    """Every problem of a batch's problem set, those without a solution included: what the batch recorded
    (``problems``; a summary written before it was recorded: the results' problems plus those it listed
    without a solution or unverified); without a summary, only the results' problems."""
    found = {str(r["problem"]) for r in results}
    if summary:
        if summary.get("problems") is not None:
            found |= set(summary["problems"])
        else:
            found |= set(summary.get("problems_without_solution") or ())
            found |= set(summary.get("problems_unverified") or ())
    return sorted(found, key=_natural)


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _no_verdict(results: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Results that are not the candidate's doing: counts per status and the problems they hit."""
    out: dict[str, Any] = {}
    for status in NO_VERDICT:
        if status == NOT_RUN:  # unverified, left out of the shares instead (module doc)
            continue
        hit = [r for r in results if r["status"] == status]
        out[status] = {"count": len(hit), "problems": sorted({r["problem"] for r in hit})}
    return out


def _timings_missing(results: list[Mapping[str, Any]]) -> str:
    """Why a summary has no comparable timing (it only says "CPU mode" when that is the reason)."""
    devices = {(r.get("environment") or {}).get("device") for r in results}
    if "cpu" in devices or any(r.get("timings") for r in results):
        return "CPU mode: timings are not comparable"
    if not results:
        return "no results"
    if not any(r["status"] == "correct" for r in results):
        return "no solution was correct, so none was timed"
    return "the correct solutions were not timed (correctness only)"


def _faster_score(r: Mapping[str, Any], mode: str) -> float | None:
    if r.get("status") != "correct":
        return 0.0
    if not (r.get("timings") or {}).get("comparable"):
        return None
    return float(faster((r.get("speedups") or {}).get(mode)))


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _p(p: float) -> str:
    return f"{p:g}"


def _mode_order(mode: str) -> tuple[int, str]:
    order = {"eager": 0, "compile": 1, "max-autotune": 2}
    return order.get(mode, 9), mode


def format_summary(summary: Mapping[str, Any]) -> str:
    """A plain-text table (printed by the CLI and the batch job)."""
    fmt = lambda v: "n/a" if v is None else (f"{v:.1%}" if isinstance(v, float) else str(v))
    lines = [
        f"problems: {summary['num_problems']}  solutions: {summary['num_solutions']}  "
        f"without a solution: {len(summary['problems_without_solution'])}",
        "status:   " + ", ".join(f"{k} {v}" for k, v in sorted(summary["status_counts"].items())),
    ]
    if summary["status_counts"].get("not_run"):
        lines.append(
            f"not_run:  {summary['status_counts']['not_run']} solutions compiled but were not run (CPU "
            "mode); they are left out of the shares below"
        )
    lines.extend(_no_verdict_lines(summary))
    if not summary["comparable"]:
        why = summary.get("timings_missing") or "not comparable"
        lines.append(f"timings:  {why}: speed metrics n/a; fast_0 is the correctness rate")
    rate = summary.get("pass_rate")
    if rate:
        lines.append(format_pass_rate(rate))
    header = f"{'baseline':<14}" + "".join(f"{'fast_' + p:>10}" for p in map(_p, P_VALUES))
    header += f"{'faster':>9}{'geomean':>9}{'median':>9}"
    if rate:
        lines.append(f"fast_p and faster, {rate['labels']['per_problem_mean']}:")
    lines.append(header)
    for mode, fp in summary["fast_p"].items():
        geo, med = summary["geomean_speedup"][mode], summary["median_speedup"][mode]
        row = f"{mode:<14}" + "".join(f"{fmt(v):>10}" for v in fp.values())
        row += f"{fmt(summary['faster_than'][mode]):>9}"
        row += f"{'n/a' if geo is None else f'{geo:.2f}x':>9}{'n/a' if med is None else f'{med:.2f}x':>9}"
        lines.append(row)
    if rate and rate["solutions_per_problem"][1] > 1:
        lines.append(f"fast_p, {rate['labels']['per_problem_best_of']}:")
        for mode, fp in summary["fast_p_best_of"].items():
            lines.append(f"{mode:<14}" + "".join(f"{fmt(v):>10}" for v in fp.values()))
    sol = summary.get("speed_of_light")
    if sol:
        lines.append(_speed_of_light_line(sol))
    if summary.get("mean_reward") is not None:
        lines.append(f"mean reward: {summary['mean_reward']:.3f}")
    return "\n".join(lines)


def _speed_of_light_line(sol: Mapping[str, Any]) -> str:
    if not sol["count"]:
        return f"speed of light: n/a ({sol['reason']})"
    return (
        f"speed of light: median {sol['median']:.1%}, geomean {sol['geomean']:.1%} of the roofline floor "
        f"(floor time / candidate time; {sol['count']} correct solutions)"
    )


def _no_verdict_lines(summary: Mapping[str, Any]) -> list[str]:
    found = {k: v for k, v in (summary.get("no_verdict") or {}).items() if v["count"]}
    if not found:
        return []
    what = ", ".join(f"{v['count']} {k} ({', '.join(v['problems'][:5])})" for k, v in found.items())
    return [
        f"no verdict: {what}: not the candidates' failures (candidate failures: "
        f"{summary.get('candidate_failures', 0)}); fast_p counts them as failures, as KernelBench counts "
        "missing results"
    ]


def plot(results: list[Mapping[str, Any]], summary: Mapping[str, Any], path: str) -> str:
    """Speedup distribution per baseline (log scale) when timings are comparable, else verdict counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 4))
    modes = [m for m, g in summary["geomean_speedup"].items() if g is not None]
    if summary["comparable"] and modes:
        for mode in modes:
            speeds = sorted(
                r["speedups"][mode]
                for r in results
                if r["status"] == "correct" and (r.get("speedups") or {}).get(mode)
            )
            ax.plot(
                speeds,
                [(i + 1) / len(speeds) for i in range(len(speeds))],
                drawstyle="steps-post",
                label=f"vs {mode} (geomean {summary['geomean_speedup'][mode]:.2f}x)",
            )
        ax.axvline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("speedup (baseline time / candidate time), correct solutions")
        ax.set_ylabel("cumulative share")
        ax.legend()
    else:
        counts = summary["status_counts"]
        ax.bar(list(counts), list(counts.values()), color="tab:blue")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts
        ax.set_ylabel("solutions")
        ax.set_title(f"verdicts ({summary.get('timings_missing') or 'timings not comparable'}: no speedups)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
