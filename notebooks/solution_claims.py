# %% [markdown]
# # Claims vs measured for a released solution set
# A set judged by `python -m experiments.solutions`: per source, how many claimed speedups survive our judge
# (correct, and measured >= min_ratio x claimed), why the others fail (the verdict class: compile error,
# wrong answer, a rejected policy check, slower than claimed, no comparable timing), and the claimed against
# the measured speedups.
#
# Percent-format notebook; as a script: `python -m notebooks.solution_claims RUN_DIR [MIN_RATIO] [OUT_DIR]`.

# %%
import json
import sys
from collections import Counter
from pathlib import Path

from research.evaluation import ClaimRule, claims_table, format_claims, load_results
from research.evaluation.figures import plot_claims

args = [a for a in sys.argv[1:] if not a.startswith("-")] if "__file__" in globals() else []
if not args:
    raise SystemExit("usage: solution_claims.py RUN_DIR [MIN_RATIO] [OUT_DIR]")
RUN = Path(args[0])
RULE = ClaimRule(min_ratio=float(args[1])) if len(args) > 1 else ClaimRule()
OUT = Path(args[2]) if len(args) > 2 else RUN / "report"
OUT.mkdir(parents=True, exist_ok=True)
results = load_results(RUN)
imported = json.loads((RUN / "import.json").read_text()) if (RUN / "import.json").is_file() else {}
print(f"run: {RUN}: {len(results)} judged solutions")
if imported:
    print(
        f"import: {imported['records']} records, {len(imported['unmatched'])} matching no problem, "
        f"{len(imported['duplicates'])} duplicate ids"
    )

# %% [markdown]
# ## Per source

# %%
table = claims_table(results, RULE)
print(format_claims(table))

# %% [markdown]
# ## Verdicts per source (all solutions, with or without claims)

# %%
for source in table["sources"]:
    counts = Counter(r["status"] for r in results if r.get("source") == source)
    print(f"{source}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))

# %% [markdown]
# ## Every claim

# %%
for row in table["rows"]:
    measured = "n/a" if row["measured"] is None else f"{row['measured']:.2f}x"
    print(
        f"{row['source']:<10}{row['key']:<48}{row['baseline']:<9}{row['claimed']:>7.2f}x{measured:>9}  "
        f"{row['outcome']}"
    )

# %%
paths = plot_claims(table, OUT / "claims")
(OUT / "claims.json").write_text(json.dumps(table, indent=2, default=str))
print("wrote", OUT / "claims.json", *paths)
