# %% [markdown]
# # Evaluation report
# Analysis of one sandbox evaluation run (`python -m experiments.evaluate` or `python -m kernels_env batch`):
# the run's summary (the same pass rates and fast_p table the run printed: docs/sandbox.md "How a run is
# scored"), status counts, the fast_p curve against each baseline (KernelBench's metric, as a function of p),
# speedup distributions and a per-problem table. Saved figures go next to the results.
#
# This is a percent-format notebook: open it in Jupyter (jupytext) or VS Code, or run it as a script:
# `python -m notebooks.evaluation_report [RUN]`: a run directory (holding results.jsonl) or a results file
# (`kernels_env batch --out runs/x.jsonl`: `runs/x.jsonl`); default: the newest run under `outputs/evaluate/`.
# The problem set comes from the summary the run wrote beside its results (problems without a solution count
# as failed); without one, only the problems that have results are counted (and the report says so).

# %%
import json
import sys
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from kernels_env.rules.summary import (
    fast_p_curve,
    format_summary,
    problem_set,
    read_batch_summary,
    summarize,
)

ROOT = Path(__file__).resolve().parents[1] if "__file__" in globals() else Path.cwd().parent


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def newest_run(base: Path) -> Path:
    runs = sorted(p.parent for p in base.glob("*/*/results.jsonl"))
    if not runs:
        fail(f"no results.jsonl under {base}: run `make examples` first, or pass a run directory or file")
    return runs[-1]


def results_file(run: Path) -> Path:
    """A run directory's results.jsonl, or the results file itself."""
    path = run / "results.jsonl" if run.is_dir() else run
    if not path.is_file():
        fail(f"{run}: neither a run directory with results.jsonl nor a results file")
    return path


def read_jsonl(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # a torn last line of an interrupted run
            continue
        if isinstance(record, dict) and "problem" in record and "status" in record:
            out.append(record)
    return out


args = [a for a in sys.argv[1:] if not a.startswith("-")] if "__file__" in globals() else []
RESULTS = results_file(Path(args[0]) if args else newest_run(ROOT / "outputs" / "evaluate"))
# figures beside the results: report_*.png in a run directory, <stem>.report_*.png beside runs/x.jsonl
PREFIX = "" if RESULTS.name == "results.jsonl" else f"{RESULTS.stem}."
results = read_jsonl(RESULTS)
if not results:
    fail(f"{RESULTS}: no results in it")
recorded = read_batch_summary(RESULTS)
problems = problem_set(recorded[1] if recorded else None, results)
summary = summarize(results, problems)
print(f"results: {RESULTS}\n{len(results)} results on {len(problems)} problems")
if recorded is None:
    print("no batch summary beside the results: problems without a solution are not known and not counted")
elif recorded[1].get("pass_rate") not in (None, summary["pass_rate"]):
    print(f"note: {recorded[0]} was written for other results (the results file changed since): recomputed")
print(format_summary(summary))

# %% [markdown]
# ## Verdicts

# %%
counts = Counter(r["status"] for r in results)
fig, ax = plt.subplots(figsize=(6, 3))
ax.barh(list(counts), list(counts.values()), color="tab:blue")
ax.set_xlabel("solutions")
ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # counts
ax.set_title("verdicts")
fig.tight_layout()
fig.savefig(RESULTS.with_name(f"{PREFIX}report_verdicts.png"), dpi=120)
for status, n in counts.most_common():
    print(f"{status:14s} {n}")

# %% [markdown]
# ## fast_p against p
# fast_p = share of all problems whose solution is correct and more than p times faster than the baseline,
# each problem weighing 1 (the mean over its solutions; dashed: the best of them, when a problem has several).
# CPU-mode runs have no comparable timings: the curve is then undefined (only fast_0, the correctness rate).

# %%
ps = np.linspace(0.0, 3.0, 61)
modes = list(summary["fast_p"])
several = summary["pass_rate"]["solutions_per_problem"][1] > 1
fig, ax = plt.subplots(figsize=(6, 4))
plotted = False
for i, mode in enumerate(modes):
    curve = fast_p_curve(results, problems, mode, ps)
    if any(v is None for v in curve):
        print(f"{mode}: timings not comparable (CPU mode): no fast_p curve")
        continue
    label = f"{mode}, {summary['pass_rate']['labels']['per_problem_mean']}"
    ax.step(ps, curve, where="post", color=f"C{i}", label=label)
    if several:
        best = fast_p_curve(results, problems, mode, ps, best=True)
        label = f"{mode}, {summary['pass_rate']['labels']['per_problem_best_of']}"
        ax.step(ps, best, where="post", ls="--", color=f"C{i}", label=label)
    plotted = True
if plotted:
    ax.set_xlabel("p (speedup threshold)")
    ax.set_ylabel("fast_p")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
else:
    why = summary.get("timings_missing") or "timings not comparable"
    ax.text(0.5, 0.5, f"no fast_p curve:\n{why}", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
fig.savefig(RESULTS.with_name(f"{PREFIX}report_fast_p.png"), dpi=120)

# %% [markdown]
# ## Per problem

# %%
print(f"{'solution':40s} {'status':14s} {'reward':>6s}  speedups")
by_problem: dict[str, list] = {p: [] for p in problems}
for r in results:
    by_problem[r["problem"]].append(r)
for problem, rs in by_problem.items():
    if not rs:
        print(f"{problem:40s} {'(no solution)':14s} {'':>6s}  counts as failed")
    for r in sorted(rs, key=lambda r: str(r.get("solution"))):
        sp = {k: round(v, 2) for k, v in (r.get("speedups") or {}).items() if v is not None}
        reward = "" if r.get("reward") is None else f"{r['reward']:g}"
        print(f"{str(r.get('solution')):40s} {r['status']:14s} {reward:>6s}  {sp}")
