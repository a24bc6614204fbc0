"""One job: import a released solution set, judge it in the sandbox, and report claims vs measured per
source and Table 1 (``python -m experiments.solutions`` fills ``SolutionSetConfig``).

Writes into ``out_dir``: the batch layout and ``results.jsonl`` (``judging``), ``import.json`` (records read,
solutions, unmatched records and duplicate ids), ``claims.json`` and ``table1.json``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernels_env.client import JudgeConfig, SandboxConfig

from .audit import read_audit
from .claims import ClaimRule, claims_table, format_claims
from .judging import judge_solutions
from .kernelbench import ProblemIndex
from .records import FieldMap, SolutionSetError
from .solution_sets import import_solutions
from .table1 import format_table1_report, table1_report


@dataclass
class SolutionSetConfig:
    input: str = ""  # the solution set file or folder (required)
    out_dir: str = "runs/solutions"
    fields: FieldMap = field(default_factory=FieldMap)
    kernelbench_dir: str | None = None  # None: $KERNELBENCH_DIR
    levels: list[int] = field(default_factory=list)  # [] every level of the checkout
    on_duplicate: str = "keep"  # keep (judge every one) | first | error
    limit: int = 0  # judge at most this many solutions (0: all), in input order
    audit: str | None = None  # an audit report (JSON/JSONL) for Table 1's audited subset
    claims: ClaimRule = field(default_factory=ClaimRule)
    resume: bool = True
    max_in_flight: int = 0
    progress: bool = True
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)


def _write(path: Path, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def evaluate_solution_set(cfg: SolutionSetConfig) -> dict[str, Any]:
    if not cfg.input:
        raise SolutionSetError("no solution set given: set input=FILE (.json, .jsonl, .parquet or a folder)")
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    index = ProblemIndex(cfg.kernelbench_dir, cfg.levels or None)
    sset = import_solutions(cfg.input, cfg.fields, index, cfg.on_duplicate)
    if cfg.limit:
        sset.solutions = sset.solutions[: cfg.limit]
    _write(
        out / "import.json",
        {
            "input": str(cfg.input),
            "kernelbench": str(index.root),
            "fields": asdict(cfg.fields),
            "records": sset.num_records,
            "solutions": len(sset.solutions),
            "unmatched": sset.unmatched,
            "duplicates": sset.duplicates,
        },
    )
    print(
        f"{sset.num_records} records: {len(sset.solutions)} solutions to judge, "
        f"{len(sset.unmatched)} matching no problem, {len(sset.duplicates)} duplicate ids "
        f"(details: {out / 'import.json'})"
    )
    for d in sset.duplicates:
        print(
            f"duplicate id {d['record_id']!r} at {', '.join(d['where'])} (on_duplicate={d['policy']})",
            file=sys.stderr,
        )
    results = judge_solutions(
        sset,
        out,
        cfg.sandbox,
        cfg.judge,
        resume=cfg.resume,
        max_in_flight=cfg.max_in_flight,
        progress=cfg.progress,
    )
    claims = claims_table(results, cfg.claims)
    _write(out / "claims.json", claims)
    audit = read_audit(cfg.audit) if cfg.audit else None
    # Table 1 is per system: one table per source (and one over the whole set).
    # Shares are over ALL tasks of the levels the set covers: a problem a source left out counts as failed.
    tasks = index.tasks_at({s.level for s in sset.solutions})
    table = {
        "tasks": len(tasks),
        "all": table1_report(results, audit, tasks=tasks),
        "by_source": {
            src: table1_report([r for r in results if r.get("source") == src], audit, tasks=tasks)
            for src in sorted({str(r.get("source")) for r in results})
        },
    }
    _write(out / "table1.json", table)
    print(format_claims(claims))
    for src, rep in table["by_source"].items():
        print(f"\nTable 1, source {src}:\n{format_table1_report(rep)}")
    print(f"results: {out / 'results.jsonl'}\nclaims:  {out / 'claims.json'}\ntable 1: {out / 'table1.json'}")
    return {"import": str(out / "import.json"), "claims": claims, "table1": table, "results": len(results)}
