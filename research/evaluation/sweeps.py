"""Collect a Hydra multirun of ``experiments.evaluate`` (e.g. ``-m +sweep=protocols``: every judge protocol x
policy on the same solutions) into one table: a row per point with the protocol and policy its verdicts were
judged under, the overrides that made it, and Table 1's overall numbers of its ``results.jsonl``. A point
without results (crashed, or never ran although ``multirun.yaml`` asked for it) is a ``failed`` row with the
reason, never dropped. Training sweeps (``pipeline.json`` points) are ``ablations``' business."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .ablations import _expected, _last_error, _overrides
from .labels import UNKNOWN
from .table1 import load_results, table1_report

METRICS = ("pass_rate", "faster_than_eager", "faster_than_compile")


def _jobs(sweep_dir: Path) -> list[Path]:
    jobs = [d for d in sweep_dir.iterdir() if (d / ".hydra" / "overrides.yaml").is_file()]
    return sorted(jobs, key=lambda d: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", d.name)])


def is_evaluation_sweep(sweep_dir: str | Path) -> bool:
    """A multirun whose points wrote verdicts (results.jsonl) and no training pipeline (pipeline.json)."""
    jobs = _jobs(Path(sweep_dir))
    return any((j / "results.jsonl").is_file() for j in jobs) and not any(
        (j / "pipeline.json").is_file() for j in jobs
    )


def _row(overrides: dict[str, str], labels: dict[str, Any] | None = None) -> dict[str, Any]:
    """Protocol and policy as the verdicts say (the overrides when there are none)."""
    lab = labels or {}
    pick = lambda k, o: lab[k] if lab.get(k, UNKNOWN) != UNKNOWN else overrides.get(o, UNKNOWN)  # noqa: E731
    return {
        "protocol": pick("protocol", "judge"),
        "policy": pick("policy", "judge.policy"),
        "overrides": overrides,
    }


def protocol_table(sweep_dir: str | Path) -> dict[str, Any]:
    """{"metrics", "rows": one per point (protocol, policy, overrides, status, reason, results, labels,
    Table 1 overall metrics), "protocols", "policies", "failed"}."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"no multirun directory at {sweep_dir}")
    rows: list[dict[str, Any]] = []
    for job in _jobs(sweep_dir):
        overrides = _overrides(job)
        if not (job / "results.jsonl").is_file():
            err = _last_error(job)
            reason = "no results.jsonl" + (f"; {err}" if err else "")
            rows.append({**_row(overrides), "status": "failed", "reason": reason, "dir": str(job)})
            continue
        report = table1_report(load_results(job))
        overall = report["full"]["overall"]
        rows.append(
            {
                **_row(overrides, report["labels"]),
                "status": "ok",
                "reason": "",
                "dir": str(job),
                "results": overall.get("results", overall.get("tasks")),
                "labels": report["labels"],
                **{m: overall.get(m) for m in METRICS},
            }
        )
    for want in _expected(sweep_dir):
        if not any(all(r["overrides"].get(k) == v for k, v in want.items()) for r in rows):
            rows.append(
                {**_row(want), "status": "failed", "reason": "never ran (no job directory)", "dir": None}
            )
    ok = [r for r in rows if r["status"] == "ok"]
    return {
        "metrics": list(METRICS),
        "rows": rows,
        "protocols": sorted({r["protocol"] for r in ok}),
        "policies": sorted({r["policy"] for r in ok}),
        "failed": [r for r in rows if r["status"] == "failed"],
    }


def format_protocols(table: dict[str, Any]) -> str:
    fmt = lambda v: "n/a" if v is None else f"{v:.1%}"  # noqa: E731
    head = f"{'protocol':<14}{'policy':<14}{'results':>8}" + "".join(
        f"{m[:18]:>20}" for m in table["metrics"]
    )
    lines = [head]
    for r in table["rows"]:
        if r["status"] != "ok":
            continue
        lines.append(
            f"{r['protocol'][:13]:<14}{r['policy'][:13]:<14}{r['results']:>8}"
            + "".join(f"{fmt(r.get(m)):>20}" for m in table["metrics"])
        )
    for r in table["failed"]:
        lines.append(f"FAILED {' '.join(f'{k}={v}' for k, v in r['overrides'].items())}: {r['reason']}")
    return "\n".join(lines)
