# %% [markdown]
# # Table 1 of an evaluation run
# CUDA Agent's Table 1 (pass rate, faster than eager / torch.compile as shares of ALL tasks, geomean speedups
# over correct solutions) per level, for any result set: `python -m experiments.evaluate`, `kernels_env
# batch`, `experiments.agent` or `experiments.solutions` results. With an audit report, also on the subset the
# degenerate-task audit leaves. Every number carries the GPU, torch, protocol, policy and precision it was
# measured under. Shares are over the run's whole problem set: a task without a solution counts as failed
# (docs/sandbox.md "How a run is scored"), so the pass rates are those the run itself printed.
#
# Percent-format notebook; as a script: `python -m notebooks.table1_report RUN [AUDIT.json] [OUT_DIR]`
# (RUN: a run directory or its results file, e.g. `kernels_env batch --out runs/x.jsonl`'s `runs/x.jsonl`).
# AUDIT.json `-`: none.

# %%
import json
import sys
from pathlib import Path

from research.evaluation import (
    format_table1_report,
    load_results,
    read_audit,
    run_tasks,
    table1_report,
)
from research.evaluation.figures import plot_table1

args = [a for a in sys.argv[1:] if a == "-" or not a.startswith("-")] if "__file__" in globals() else []
if not args:
    raise SystemExit("usage: table1_report.py RUN [AUDIT.json] [OUT_DIR]")
RUN = Path(args[0])
AUDIT = Path(args[1]) if len(args) > 1 and args[1] != "-" else None
OUT = Path(args[2]) if len(args) > 2 else (RUN if RUN.is_dir() else RUN.parent) / "report"
OUT.mkdir(parents=True, exist_ok=True)
results = load_results(RUN)
print(f"run: {RUN}: {len(results)} results")

# %% [markdown]
# ## The table
# Speed columns are `n/a` when timings are not comparable (CPU mode: correctness only).

# %%
# The run's problem set (a solution-set run's checkout, a batch's recorded problems): tasks without a
# solution count as failed, as in the run's own summary.
tasks = run_tasks(RUN, results)
report = table1_report(results, read_audit(AUDIT) if AUDIT else None, tasks=tasks)
if tasks:
    print(f"{len(tasks)} tasks in the run's problem set; those without a result count as failed")
else:
    print("no problem set recorded beside the results: only tasks with a result are counted")
print(format_table1_report(report))
if report["audit"]:
    for task, flags in report["audit"]["excluded"].items():
        print(f"left out: {task}: {', '.join(flags)}")

# %% [markdown]
# ## Figure and the table on disk

# %%
paths = plot_table1(report, OUT / "table1")
(OUT / "table1.json").write_text(json.dumps(report, indent=2, default=str))
print("wrote", OUT / "table1.json", *paths)
