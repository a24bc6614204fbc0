# %% [markdown]
# # Ablations: the table and the training curves of a multirun
# A Hydra multirun of `python -m experiments.train -m +sweep=ablations seed=0,1,2` (local or SLURM): one row
# per ablation x seed with its final metrics, failed points reported with their reason (never dropped), the
# mean and spread over seeds per ablation, and the training curves (reward, faster-than-compile rate, entropy,
# explained variance, clip fraction, response length) with the ablations overlaid.
#
# Percent-format notebook; as a script: `python -m notebooks.ablation_report MULTIRUN_DIR [STAGE] [OUT_DIR]`.

# %%
import json
import sys
from pathlib import Path

from research.evaluation import ablation_table, collect, curves, format_ablations
from research.evaluation.figures import plot_ablations, plot_curves

args = [a for a in sys.argv[1:] if not a.startswith("-")] if "__file__" in globals() else []
if not args:
    raise SystemExit("usage: ablation_report.py MULTIRUN_DIR [STAGE] [OUT_DIR]")
SWEEP = Path(args[0])
STAGE = args[1] if len(args) > 1 else "ppo"
OUT = Path(args[2]) if len(args) > 2 else SWEEP / "report"
OUT.mkdir(parents=True, exist_ok=True)
points = collect(SWEEP)
print(f"{SWEEP}: {len(points)} points")

# %% [markdown]
# ## Final metrics, ablation x seed

# %%
METRICS = (
    "reward_mean",
    "pass_rate",
    "faster_eager",
    "faster_compile",
    "explained_variance",
    "entropy",
    "clip_frac",
    "response_tokens_mean",
)
table = ablation_table(points)
shown = tuple(m for m in METRICS if m in table["metrics"]) or tuple(table["metrics"][:6])
print(format_ablations(table, shown))

# %% [markdown]
# ## Mean +- std over seeds (points that finished)

# %%
for name, p in table["ablations"].items():
    cells = [f"{m} {p[m]['mean']:.3f}+-{p[m]['std']:.3f}" for m in shown if p[m]["mean"] is not None]
    print(f"{name:<20}{p['points'] - p['failed']}/{p['points']} finished  " + "  ".join(cells))

# %% [markdown]
# ## Training curves of the `STAGE` stage

# %%
data = curves(points, STAGE)
for name, runs in data.items():
    print(f"{name}: {len(runs)} runs" + ("" if runs else " (no such metric in the metrics files)"))
paths = plot_curves(data, OUT / f"curves_{STAGE}")
for m in ("faster_compile", "reward_mean"):
    if m in table["metrics"]:
        paths += plot_ablations(table, m, OUT / f"ablations_{m}")
(OUT / "ablations.json").write_text(json.dumps(table, indent=2, default=str))
(OUT / f"curves_{STAGE}.json").write_text(json.dumps(data))
print("wrote", OUT / "ablations.json", *paths)
