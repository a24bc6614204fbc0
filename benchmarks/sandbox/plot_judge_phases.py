"""Plot where the judge's seconds go per evaluated candidate, before and after a change.

    python -m benchmarks.sandbox.plot_judge_phases JUDGE_PHASES.json OUT.png  # an e2e step's phases

The input holds ``before`` and ``after`` lists of e2e records (``durations`` with ``compile`` and
``run_phases``, as ``benchmarks.sandbox.sandbox_throughput e2e`` records them); phases are grouped (trials,
input families, timing, checks after timing, load and cleanup) and shown as the median over candidates.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

GROUPS = ("compile", "trials", "input families", "timing", "after timing", "load + cleanup")


def group(phase: str) -> str:
    if phase.startswith("trial"):
        return "trials"
    if phase.startswith("input family"):
        return "input families"
    if phase.startswith("timing"):
        return "timing"
    if phase in ("audit after timing", "re-checks", "final checks"):
        return "after timing"
    return "load + cleanup"


def medians(records: list[dict]) -> dict[str, float]:
    per: dict[str, list[float]] = {g: [] for g in GROUPS}
    for r in records:
        d = r.get("durations") or {}
        sums = dict.fromkeys(GROUPS, 0.0)
        sums["compile"] = float(d.get("compile") or 0.0)
        for phase, s in (d.get("run_phases") or {}).items():
            sums[group(phase)] += s
        for g in GROUPS:
            per[g].append(sums[g])
    return {g: statistics.median(v) if v else 0.0 for g, v in per.items()}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not Path(argv[0]).is_file():
        what = f"no file {argv[0]}" if len(argv) == 2 else "usage: plot_judge_phases PHASES.json OUT.png"
        print(f"plot_judge_phases: {what}", file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(argv[0]) as f:
        doc = json.load(f)
    sides = [(k, medians(doc[k]["records"])) for k in ("before", "after")]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    colors = dict(zip(GROUPS, plt.get_cmap("tab10").colors))
    for i, (_name, m) in enumerate(sides):
        left = 0.0
        for g in GROUPS:
            ax.barh(i, m[g], left=left, color=colors[g], label=g if i == 0 else None)
            left += m[g]
        ax.text(left + 0.05, i, f"{left:.2f} s", va="center")
    ax.set_yticks(range(len(sides)), [s[0] for s in sides])
    ax.set_xlabel("seconds per evaluated candidate (median of each phase group)")
    ax.set_title(f"Where the judge's time goes ({doc.get('gpu')}, policy {doc.get('policy')})")
    ax.legend(fontsize=7, ncol=3, loc="upper right")
    fig.tight_layout()
    fig.savefig(argv[1], dpi=120)
    for name, m in sides:
        print(name, {g: round(v, 3) for g, v in m.items()}, "total", round(sum(m.values()), 3))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
