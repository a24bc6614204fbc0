"""The degenerate-task audit's report (``python -m kernels_env audit --problems DIR --json``, or the same
reports one per line as JSONL) as a lookup: which problems a constant, zeros or an input-blind answer passes,
at which tolerance.

A flag raised at tolerance t also holds at every looser tolerance, so a problem is degenerate for a judge
whose fp32 tolerance is >= t (flags without a tolerance, e.g. ``constant``, hold at every tolerance).
Problems that the audit could not run (``error``/``skipped``) are not called degenerate: they stay in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_LEVEL = re.compile(r"level[_\- ]?(\d+)", re.I)


def _key(name: str) -> tuple[str | None, str]:
    m = _LEVEL.search(name)
    return (m.group(1) if m else None), Path(name).stem


@dataclass
class Audit:
    reports: dict[tuple[str | None, str], dict[str, Any]] = field(default_factory=dict)
    path: str = ""

    def report(self, level: str | None, problem: str) -> dict[str, Any] | None:
        stem = Path(str(problem)).stem
        return self.reports.get((str(level), stem)) or self.reports.get((None, stem))

    def degenerate(self, level: str | None, problem: str, tolerance: float | None) -> list[str]:
        """The flags (``kind@tol``) that make ``problem`` degenerate for a judge at ``tolerance``."""
        rep = self.report(level, problem)
        if not rep or rep.get("status") != "flagged":
            return []
        out = []
        for f in rep.get("flags") or []:
            t = f.get("tolerance")
            if t is None or tolerance is None or t <= tolerance * (1 + 1e-9):
                out.append(f"{f['kind']}" + ("" if t is None else f"@{t:g}"))
        return out


def read_audit(path: str | Path) -> Audit:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no audit report at {path} (write one with: python -m kernels_env audit "
            "--problems DIR --json > audit.json)"
        )
    text = path.read_text()
    try:
        doc = json.loads(text)
        reports = doc["problems"] if isinstance(doc, dict) and "problems" in doc else doc
        if isinstance(reports, dict):
            reports = [reports]
    except json.JSONDecodeError:
        reports = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    reports.append(json.loads(line))
                except json.JSONDecodeError:
                    raise ValueError(f"{path} line {n}: not JSON (an audit report, JSON or JSONL)") from None
    if not isinstance(reports, list) or not all(isinstance(r, dict) and "problem" in r for r in reports):
        raise ValueError(f"{path} is not an audit report: expected problem reports with a 'problem' field")
    return Audit({_key(r["problem"]): r for r in reports}, str(path))
