# %% [markdown]
# # Degenerate-task audit of a problem set
# Runs the sandbox's audit (`python -m kernels_env audit --json`) on a problem directory, e.g. a KernelBench
# checkout, and tabulates the problems that a constant, all zeros or an input-blind answer would pass, per
# flag and tolerance (1e-4 is the `kernelbench` protocol's fp32 tolerance, 1e-2 `cuda_agent`'s). The report
# it writes (`audit.json`) is what Table 1's audited subset reads.
#
# Percent-format notebook; as a script: `python -m notebooks.task_audit PROBLEMS_DIR [OUT_DIR] [--device D]`
# (an existing `OUT_DIR/audit.json` is reused; delete it to audit again).

# %%
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from research.evaluation.figures import plot_audit

ROOT = Path(__file__).resolve().parents[1] if "__file__" in globals() else Path.cwd().parent

argv = sys.argv[1:] if "__file__" in globals() else []
args = [a for a in argv if not a.startswith("-")]
if not args:
    raise SystemExit("usage: task_audit.py PROBLEMS_DIR [OUT_DIR] [--device cpu|cuda]")
PROBLEMS = Path(args[0])
OUT = Path(args[1]) if len(args) > 1 else Path("outputs") / "audit" / PROBLEMS.name
DEVICE = next((a.split("=", 1)[1] for a in argv if a.startswith("--device=")), "auto")
OUT.mkdir(parents=True, exist_ok=True)
audit_path = OUT / "audit.json"
if not audit_path.is_file():
    cmd = [
        sys.executable,
        "-m",
        "kernels_env",
        "audit",
        "--problems",
        str(PROBLEMS),
        "--json",
        "--device",
        DEVICE,
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if run.returncode != 0:
        raise SystemExit(f"audit failed ({run.returncode}): {run.stderr.strip()[-500:]}")
    audit_path.write_text(run.stdout)
audit = json.loads(audit_path.read_text())
reports = audit["problems"]
print(f"{len(reports)} problems audited on {audit['device']} at tolerances {audit['tolerances']}")

# %% [markdown]
# ## Flags per kind and tolerance

# %%
by_flag = Counter()
for r in reports:
    for f in {(f["kind"], f["tolerance"]) for f in r["flags"]}:
        by_flag[f] += 1
status = Counter(r["status"] for r in reports)
print("status: " + ", ".join(f"{k} {v}" for k, v in sorted(status.items())))
for (kind, tol), n in sorted(by_flag.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
    print(f"{kind:<24}{'any' if tol is None else f'{tol:g}':>8}{n:>6}")

# %% [markdown]
# ## Flagged problems, and which tolerance makes them degenerate

# %%
degenerate = {}
for t in audit["tolerances"]:
    degenerate[str(t)] = sorted(
        r["problem"]
        for r in reports
        if any(f["tolerance"] is None or f["tolerance"] <= t for f in r["flags"])
    )
for r in reports:
    if r["status"] != "ok":
        print(
            f"{r['status']:<8} {r['problem']}: "
            + "; ".join(f"{f['kind']}@{f['tolerance']}" for f in r["flags"])
        )
for t, names in degenerate.items():
    print(f"degenerate at tolerance {t}: {len(names)} of {len(reports)}")

# %%
paths = plot_audit(reports, OUT / "audit")
table = {
    "status": dict(status),
    "flags": {f"{k}@{t}": n for (k, t), n in by_flag.items()},
    "degenerate": degenerate,
}
(OUT / "audit_table.json").write_text(json.dumps(table, indent=2))
print("wrote", OUT / "audit_table.json", *paths)
