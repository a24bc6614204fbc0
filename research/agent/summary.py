"""The paper's Table 1 per level: pass rate, faster than eager / torch.compile (shares of ALL tasks, ">5%
faster" as in CUDA Agent's reward), geometric-mean speedups over correct solutions only."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

FASTER = 1 / 0.95  # (t0 - t) / t0 > 0.05  <=>  t0 / t > 1 / 0.95


def _row(results: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(results)
    correct = [r for r in results if r.get("status") == "correct"]
    comparable = any(r.get("comparable") for r in correct)
    row: dict[str, Any] = {"tasks": n, "pass_rate": len(correct) / n if n else None, "comparable": comparable}
    for mode in ("eager", "compile"):
        speeds = [(r.get("speedups") or {}).get(mode) for r in correct if r.get("comparable")]
        speeds = [s for s in speeds if s]
        row[f"faster_than_{mode}"] = sum(s > FASTER for s in speeds) / n if n and comparable else None
        row[f"geomean_vs_{mode}"] = math.exp(statistics.fmean(map(math.log, speeds))) if speeds else None
    row["mean_reward"] = (
        statistics.fmean(r["reward"] for r in results if r.get("reward") is not None)
        if any(r.get("reward") is not None for r in results)
        else None
    )
    row["status_counts"] = dict(sorted(_count(r.get("status") for r in results).items()))
    row["end_reasons"] = dict(sorted(_count(r.get("end_reason") for r in results).items()))
    return row


def _count(items) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for x in items:
        out[str(x)] += 1
    return out


def table1(results: list[dict[str, Any]]) -> dict[str, Any]:
    """{"overall": row, "levels": {level: row}} over one result per task. ``not_run`` (CPU mode) counts as
    not passed; speed columns are None without comparable timings."""
    levels: dict[str, list] = defaultdict(list)
    for r in results:
        levels[str(r.get("level", "all"))].append(r)
    return {"overall": _row(results), "levels": {k: _row(v) for k, v in sorted(levels.items())}}


def format_table1(summary: dict[str, Any]) -> str:
    fmt = lambda v: "n/a" if v is None else (f"{v:.1%}" if isinstance(v, float) else str(v))  # noqa: E731
    gm = lambda v: "n/a" if v is None else f"{v:.2f}x"  # noqa: E731
    head = f"{'subset':<10}{'tasks':>6}{'pass':>8}{'>eager':>8}{'>compile':>9}{'gm eager':>9}{'gm comp':>9}"
    lines = [head]
    for name, row in [("overall", summary["overall"]), *summary["levels"].items()]:
        lines.append(
            f"{('L' + name) if name not in ('overall', 'all') else name:<10}{row['tasks']:>6}"
            f"{fmt(row['pass_rate']):>8}{fmt(row['faster_than_eager']):>8}{fmt(row['faster_than_compile']):>9}"
            f"{gm(row['geomean_vs_eager']):>9}{gm(row['geomean_vs_compile']):>9}"
        )
    return "\n".join(lines)
