# %% [markdown]
# # The learning study: rates, paired difference and training curves
# A study directory as `scripts/gpu_study.sh` writes it (`results/*.json`: one `study-results/1` file per
# run x split x seed; `runs/<kind>-s<seed>/<stage>/metrics.jsonl`): each run's pass / faster-than-eager /
# faster-than-compile rates on every evaluated split with 95% bootstrap CIs over tasks (per seed and pooled),
# the paired difference full - sft per seed and pooled, the training curves (reward_mean, pass_rate) of every
# stage with one line per run, and `study_report.md` holding the same numbers (docs/study_protocol.md).
#
# Percent-format notebook; as a script: `python -m notebooks.study_report STUDY_DIR [OUT_DIR] [A] [B]`
# (default OUT_DIR: STUDY_DIR/report; A, B: the kinds compared, default full and sft).

# %%
import sys
from pathlib import Path

from research.evaluation.study_figures import ResultsError, StudyReportError, study_report

args = [a for a in sys.argv[1:] if not a.startswith("-")] if "__file__" in globals() else []
if not args:
    raise SystemExit("usage: study_report.py STUDY_DIR [OUT_DIR] [A] [B]")
STUDY = Path(args[0])
OUT = Path(args[1]) if len(args) > 1 else STUDY / "report"
A, B = (args[2] if len(args) > 2 else "full"), (args[3] if len(args) > 3 else "sft")
try:
    rep = study_report(STUDY, OUT, a=A, b=B)
except (StudyReportError, ResultsError) as exc:  # a user error: one line, no traceback
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)

# %% [markdown]
# ## The tables (`study_report.md`)

# %%
print((OUT / "study_report.md").read_text())

# %% [markdown]
# ## Files written

# %%
for p in rep["paths"]:
    print(p)
