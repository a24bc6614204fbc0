"""Import a released set of KernelBench solutions: map each record's fields, match it to a problem file of a
KernelBench checkout, and report what could not be matched and which ids repeat (never silently dropped).

    index = ProblemIndex("/path/to/KernelBench")              # or $KERNELBENCH_DIR
    sset = import_solutions("set.jsonl", FieldMap(code="kernel", problem_name="task"), index)
    sset.solutions, sset.unmatched, sset.duplicates
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .kernelbench import Problem, ProblemIndex
from .records import (
    FieldMap,
    RawRecord,
    SolutionSetError,
    as_int,
    as_speedup,
    get_field,
    has_field,
    is_missing,
    read_records,
)

DUPLICATE_POLICIES = ("keep", "first", "error")
_OPTIONAL = ("reference", "claimed_speedup_eager", "claimed_speedup_compile", "source", "id")


@dataclass
class Solution:
    key: str  # unique in the set: what results.jsonl and resuming match on
    record_id: str
    source: str
    level: int
    problem: Problem
    code: str
    where: str  # file and record position
    claimed: dict[str, float] = field(default_factory=dict)  # baseline -> claimed speedup
    reference_matches: bool | None = None  # the record's own reference equals the checkout's (None: none)

    def meta(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "record_id": self.record_id,
            "source": self.source,
            "level": self.level,
            "problem": self.problem.stem,
            "problem_key": self.problem.key,
            "claimed": self.claimed,
            "reference_matches": self.reference_matches,
            "where": self.where,
        }


@dataclass
class SolutionSet:
    solutions: list[Solution]
    unmatched: list[dict[str, Any]]  # {where, record_id, source, reason}
    duplicates: list[dict[str, Any]]  # {record_id, where: [...], kept: [...keys]}
    num_records: int

    def sources(self) -> list[str]:
        return sorted({s.source for s in self.solutions} | {u["source"] for u in self.unmatched})


def _slug(text: str, limit: int = 48) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:limit] or "x"


def _norm_code(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _check_mapping(records: list[RawRecord], fields: FieldMap) -> None:
    """A mapped optional field that no record has is a mapping mistake, not 'no claims'."""
    if not records:
        return
    cols = sorted(records[0].data)
    for name in _OPTIONAL:
        col = getattr(fields, name)
        if col and not any(has_field(r.data, col) for r in records):
            raise SolutionSetError(
                f"field {name!r} is mapped to {col!r}, which no record has; columns are {cols}"
            )
    problem_cols = [c for c in (fields.level, fields.problem_id, fields.problem_name) if c]
    if not any(has_field(r.data, c) for r in records for c in problem_cols):
        raise SolutionSetError(
            f"no record has a problem field ({', '.join(problem_cols)}); columns are {cols}"
        )


def _get(rec: RawRecord, col: str | None) -> Any:
    return None if not col else get_field(rec.data, col)


def import_solutions(
    path: str | Path, fields: FieldMap, index: ProblemIndex, on_duplicate: str = "keep"
) -> SolutionSet:
    if on_duplicate not in DUPLICATE_POLICIES:
        raise ValueError(f"on_duplicate must be one of {DUPLICATE_POLICIES}, got {on_duplicate!r}")
    if not (fields.problem_name or (fields.level and fields.problem_id)):
        raise SolutionSetError(
            "the field mapping names no problem: set problem_name, or level and problem_id"
        )
    records = read_records(path)
    _check_mapping(records, fields)
    default_source = fields.default_source or Path(path).stem
    seen: dict[str, list[str]] = {}
    solutions, unmatched, keys = [], [], set()
    for rec in records:
        code = _get(rec, fields.code)
        if is_missing(code):
            raise SolutionSetError(
                f"{rec.where}: the solution code field {fields.code!r} is missing; "
                f"the record has {sorted(rec.data)}"
            )
        if not isinstance(code, str) or not code.strip():
            raise SolutionSetError(f"{rec.where}: field {fields.code!r} is not source text")
        level = _get(rec, fields.level)
        pid = _get(rec, fields.problem_id)
        name = _get(rec, fields.problem_name)
        level = None if is_missing(level) else as_int(level)
        pid = None if is_missing(pid) else as_int(pid)
        name = None if is_missing(name) else str(name)
        if name is None and (level is None or pid is None):
            mapped = ", ".join(
                repr(getattr(fields, f))
                for f in ("level", "problem_id", "problem_name")
                if getattr(fields, f)
            )
            raise SolutionSetError(f"{rec.where}: no problem named (fields {mapped} missing or empty)")
        src = _get(rec, fields.source)
        source = default_source if is_missing(src) else str(src)
        rid = _get(rec, fields.id)
        record_id = str(rid) if not is_missing(rid) else (rec.default_id or f"{rec.file.stem}:{rec.index}")
        problem = index.lookup(level, pid, name)
        if problem is None:
            what = name if name is not None else f"level {level} id {pid}"
            unmatched.append(
                {
                    "where": rec.where,
                    "record_id": record_id,
                    "source": source,
                    "reason": f"no problem file for {what} in {index.root}",
                }
            )
            continue
        seen.setdefault(record_id, []).append(rec.where)
        if len(seen[record_id]) > 1:
            if on_duplicate == "error":
                raise SolutionSetError(
                    f"{rec.where}: duplicate id {record_id!r} (first at {seen[record_id][0]})"
                )
            if on_duplicate == "first":
                continue
        claimed = {}
        for mode in ("eager", "compile"):
            raw = _get(rec, getattr(fields, f"claimed_speedup_{mode}"))
            if not is_missing(raw):
                value = as_speedup(raw)
                if value is None:
                    raise SolutionSetError(
                        f"{rec.where}: claimed speedup {getattr(fields, f'claimed_speedup_{mode}')!r} = "
                        f"{raw!r} is not a positive number"
                    )
                claimed[mode] = value
        ref = _get(rec, fields.reference)
        matches = None if is_missing(ref) else _norm_code(str(ref)) == _norm_code(problem.path.read_text())
        base = f"level{problem.level}/{problem.stem}__{_slug(source, 24)}-{_slug(record_id)}"
        key, n = base, 1
        while key in keys:
            n += 1
            key = f"{base}-{n}"
        keys.add(key)
        solutions.append(
            Solution(key, record_id, source, problem.level, problem, code, rec.where, claimed, matches)
        )
    duplicates = [
        {"record_id": rid, "where": wh, "policy": on_duplicate} for rid, wh in seen.items() if len(wh) > 1
    ]
    return SolutionSet(solutions, unmatched, duplicates, len(records))
