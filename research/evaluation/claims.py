"""Claimed vs measured speedups of a judged solution set, per source: which claims survive and why the
others fail.

A claim (a solution's claimed speedup over one baseline) **survives** when the sandbox finds the solution
``correct``, its timing comparable, and the measured speedup at least ``min_ratio`` x the claim. Otherwise
its outcome class says why: the verdict's status (``compile_error``, ``incorrect``, ``runtime_error``,
``timeout``, ``not_run``, ...; ``rejected:<check>`` with the failed policy check), ``slower_than_claimed``
(correct, measured below ``min_ratio`` x claim), or ``timing_not_comparable`` (correct, but no comparable
timing: CPU mode, or that baseline failed to run). ``direction_holds`` counts claims of a >5% speedup that
are still >5% faster (CUDA Agent's rule), whatever the magnitude.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

MODES = ("eager", "compile")
SURVIVES = "survives"


@dataclass
class ClaimRule:
    min_ratio: float = 0.8  # measured / claimed at or above this: the claim survives
    margin: float = 0.05  # "faster" means more than this much faster (CUDA Agent: 5%)


def outcome(result: dict[str, Any], mode: str, rule: ClaimRule) -> tuple[str, float | None]:
    """(outcome class, measured speedup or None) of one result's claim over ``mode``."""
    status = result.get("status")
    if status != "correct":
        return (
            f"rejected:{result.get('check')}" if status == "rejected" and result.get("check") else str(status)
        ), None
    measured = (result.get("speedups") or {}).get(mode)
    if not (result.get("timings") or {}).get("comparable") or measured is None:
        return "timing_not_comparable", None
    claimed = result["claimed"][mode]
    return (SURVIVES if measured >= rule.min_ratio * claimed else "slower_than_claimed"), float(measured)


def _geomean(xs: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else None


def claim_rows(results: list[dict[str, Any]], rule: ClaimRule | None = None) -> list[dict[str, Any]]:
    """One row per (solution, baseline) with a claim."""
    rule = rule or ClaimRule()
    rows = []
    for r in results:
        for mode in MODES:
            claimed = (r.get("claimed") or {}).get(mode)
            if claimed is None:
                continue
            cls, measured = outcome(r, mode, rule)
            faster_claim = claimed > 1 + rule.margin
            rows.append(
                {
                    "source": r.get("source"),
                    "key": r.get("key"),
                    "level": r.get("level"),
                    "problem": r.get("problem"),
                    "baseline": mode,
                    "claimed": claimed,
                    "measured": measured,
                    "ratio": None if measured is None else measured / claimed,
                    "status": r.get("status"),
                    "outcome": cls,
                    "direction_holds": None
                    if not faster_claim or measured is None
                    else measured > 1 + rule.margin,
                }
            )
    return rows


def claims_table(results: list[dict[str, Any]], rule: ClaimRule | None = None) -> dict[str, Any]:
    """{"rule", "sources": {source: {baseline: summary}}, "rows"}; a summary has the counts of solutions,
    passing ones and claims, survivors, outcome classes, geomean claimed/measured (over claims with a
    measurement) and the median measured/claimed ratio."""
    rule = rule or ClaimRule()
    rows = claim_rows(results, rule)
    by_source: dict[str, dict[str, Any]] = {}
    solutions = Counter(r.get("source") for r in results)
    passed = Counter(r.get("source") for r in results if r.get("status") == "correct")
    grouped: dict[tuple, list] = defaultdict(list)
    for row in rows:
        grouped[(row["source"], row["baseline"])].append(row)
    for source in sorted(solutions, key=str):
        by_source[source] = {"solutions": solutions[source], "correct": passed[source], "baselines": {}}
        for mode in MODES:
            g = grouped.get((source, mode), [])
            if not g:
                continue
            pairs = [(x["claimed"], x["measured"]) for x in g if x["measured"] is not None]
            directional = [x["direction_holds"] for x in g if x["direction_holds"] is not None]
            by_source[source]["baselines"][mode] = {
                "claims": len(g),
                "survive": sum(x["outcome"] == SURVIVES for x in g),
                "outcomes": dict(sorted(Counter(x["outcome"] for x in g).items())),
                "measured": len(pairs),
                "geomean_claimed": _geomean([c for c, _ in pairs]),
                "geomean_measured": _geomean([m for _, m in pairs]),
                "median_ratio": statistics.median(m / c for c, m in pairs) if pairs else None,
                "direction_holds": sum(directional),
                "direction_claims": len(directional),
            }
    return {"rule": {"min_ratio": rule.min_ratio, "margin": rule.margin}, "sources": by_source, "rows": rows}


def format_claims(table: dict[str, Any]) -> str:
    gm = lambda v: "n/a" if v is None else f"{v:.2f}x"  # noqa: E731
    head = (
        f"{'source':<18}{'base':<9}{'sols':>5}{'pass':>5}{'claims':>7}{'survive':>8}"
        f"{'claimed':>9}{'measured':>9}  why the others fail"
    )
    lines = [f"a claim survives when correct and measured >= {table['rule']['min_ratio']:g} x claimed", head]
    for source, s in table["sources"].items():
        if not s["baselines"]:
            lines.append(
                f"{str(source)[:17]:<18}{'-':<9}{s['solutions']:>5}{s['correct']:>5}{0:>7}  (no claims)"
            )
        for mode, b in s["baselines"].items():
            why = ", ".join(f"{k} {v}" for k, v in b["outcomes"].items() if k != SURVIVES) or "-"
            lines.append(
                f"{str(source)[:17]:<18}{mode:<9}{s['solutions']:>5}{s['correct']:>5}{b['claims']:>7}"
                f"{b['survive']:>8}{gm(b['geomean_claimed']):>9}{gm(b['geomean_measured']):>9}  {why}"
            )
    return "\n".join(lines)
