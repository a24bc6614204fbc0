# %% [markdown]
# # Evaluation report
# Analysis of one sandbox evaluation run (`python -m experiments.evaluate` or `python -m kernels_env batch`):
# status counts, the fast_p curve against each baseline (KernelBench's metric, as a function of p),
# speedup distributions and a per-problem table. Saved figures go next to the results.
#
# This is a percent-format notebook: open it in Jupyter (jupytext) or VS Code, or run it as a script:
# `python notebooks/evaluation_report.py [RUN_DIR]` (default: the newest run under `outputs/evaluate/`).

# %%
import json
import sys
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] if "__file__" in globals() else Path.cwd().parent
sys.path.insert(0, str(ROOT))
from kernels_env.rules.summary import fast_p_curve, summarize  # noqa: E402


def newest_run(base: Path) -> Path:
    runs = sorted(p.parent for p in base.glob("*/*/results.jsonl"))
    if not runs:
        raise SystemExit(f"no results.jsonl under {base}: run `make examples` first, or pass a run directory")
    return runs[-1]


args = [a for a in sys.argv[1:] if not a.startswith("-")] if "__file__" in globals() else []
RUN = Path(args[0]) if args else newest_run(ROOT / "outputs" / "evaluate")
results = [json.loads(line) for line in (RUN / "results.jsonl").read_text().splitlines() if line.strip()]
summary = summarize(results, [r["problem"] for r in results])
print(f"run: {RUN}\n{len(results)} results on {summary['num_problems']} problems")

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
fig.savefig(RUN / "report_verdicts.png", dpi=120)
for status, n in counts.most_common():
    print(f"{status:14s} {n}")

# %% [markdown]
# ## fast_p against p
# fast_p = share of all problems whose solution is correct and more than p times faster than the baseline.
# CPU-mode runs have no comparable timings: the curve is then undefined (only fast_0, the correctness rate).

# %%
ps = np.linspace(0.0, 3.0, 61)
modes = sorted({m for r in results for m in (r.get("speedups") or {})}) or ["eager"]
fig, ax = plt.subplots(figsize=(6, 4))
plotted = False
for mode in modes:
    curve = fast_p_curve(results, [r["problem"] for r in results], mode, ps)
    if any(v is None for v in curve):
        print(f"{mode}: timings not comparable (CPU mode); fast_0 = {summary['fast_p'][mode]['0']}")
        continue
    ax.step(ps, curve, where="post", label=mode)
    plotted = True
ax.set_xlabel("p (speedup threshold)")
ax.set_ylabel("fast_p")
ax.set_ylim(0, 1.02)
ax.grid(alpha=0.3)
if plotted:
    ax.legend()  # loc "best": where no curve runs
else:  # an empty panel says why
    ax.text(0.5, 0.5, "no comparable timings\n(CPU mode: correctness only)", ha="center", va="center")
fig.tight_layout()
fig.savefig(RUN / "report_fast_p.png", dpi=120)

# %% [markdown]
# ## Per problem

# %%
print(f"{'solution':40s} {'status':14s} {'reward':>6s}  speedups")
for r in sorted(results, key=lambda r: (r["problem"], r["solution"])):
    sp = {k: round(v, 2) for k, v in (r.get("speedups") or {}).items() if v is not None}
    reward = "" if r.get("reward") is None else f"{r['reward']:g}"
    print(f"{r['solution']:40s} {r['status']:14s} {reward:>6s}  {sp}")
