"""Reading a released solution set: JSON, JSONL or Parquet files (or a folder of them) into plain records,
and the field mapping that says which column holds what.

A JSON file may be a list of records, ``{"data"|"solutions"|"records"|"results": [...]}``, a mapping
``{record_id: record}`` (per-task sets) or one record; a folder is every such file in it (one record per
per-task JSON file, its id defaulting to the file stem). Field names may be dotted paths into nested
objects (``meta.level``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet")
_LIST_KEYS = ("data", "solutions", "records", "results", "rows")


class SolutionSetError(ValueError):
    """A solution set that cannot be imported as mapped (the message names the file, record and field)."""


@dataclass
class FieldMap:
    """Which field of a record holds what. ``None``: the set has no such field.

    A record names its problem by ``level`` + ``problem_id``, or by ``problem_name`` (the file stem
    ``19_ReLU``, the name ``ReLU`` or a path ``level1/19_ReLU.py``; ``level`` narrows it down). Claimed
    speedups are numbers or strings such as ``"2.3x"``. ``source`` names the system that wrote the
    solution; without it every record gets ``default_source`` (or the input file's stem).
    """

    code: str = "code"
    level: str | None = "level"
    problem_id: str | None = "problem_id"
    problem_name: str | None = "problem_name"
    id: str | None = None
    reference: str | None = None
    claimed_speedup_eager: str | None = None
    claimed_speedup_compile: str | None = None
    source: str | None = None
    default_source: str = ""


@dataclass(frozen=True)
class RawRecord:
    file: Path
    index: int  # position in its file
    data: dict[str, Any]
    default_id: str | None = None  # per-task JSON: the file stem

    @property
    def where(self) -> str:
        return f"{self.file.name} record {self.index}"


def _rows(path: Path) -> list[tuple[dict, str | None]]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((json.loads(line), None))
            except json.JSONDecodeError as exc:
                raise SolutionSetError(f"{path.name} line {n}: not JSON ({exc.msg})") from None
        return rows
    if suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise SolutionSetError(f"{path.name}: not JSON ({exc.msg} at line {exc.lineno})") from None
        if isinstance(data, list):
            return [(r, None) for r in data]
        if isinstance(data, dict):
            for key in _LIST_KEYS:
                if isinstance(data.get(key), list):
                    return [(r, None) for r in data[key]]
            if data and all(isinstance(v, dict) for v in data.values()):
                return [(v, str(k)) for k, v in data.items()]
            return [(data, path.stem)]
        raise SolutionSetError(f"{path.name}: a JSON list or object of records expected")
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise SolutionSetError(
                f"reading {path.name} needs pyarrow (pinned in requirements.txt): pip install pyarrow"
            ) from None
        return [(r, None) for r in pq.read_table(path).to_pylist()]
    raise SolutionSetError(f"{path}: unsupported file type {suffix!r} (one of {', '.join(SUFFIXES)})")


def read_records(path: str | Path) -> list[RawRecord]:
    path = Path(path).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in SUFFIXES)
        if not files:
            raise SolutionSetError(f"{path}: no {'/'.join(SUFFIXES)} files in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise SolutionSetError(f"solution set {path} does not exist")
    out = []
    for f in files:
        for i, (row, default_id) in enumerate(_rows(f)):
            if not isinstance(row, dict):
                raise SolutionSetError(f"{f.name} record {i}: an object expected, got {type(row).__name__}")
            out.append(RawRecord(f, i, row, default_id))
    return out


_MISSING = object()


def get_field(data: dict[str, Any], path: str) -> Any:
    """``data[path]``, or a dotted path into nested objects; ``_MISSING`` when absent."""
    if path in data:
        return data[path]
    cur: Any = data
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def has_field(data: dict[str, Any], path: str) -> bool:
    return get_field(data, path) is not _MISSING


def is_missing(value: Any) -> bool:
    return value is _MISSING or value is None or (isinstance(value, float) and value != value)


def as_int(value: Any) -> int | None:
    """1, "1", "level1", "L1", 1.0 -> 1; None when no integer is in it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    m = re.search(r"\d+", str(value))
    return int(m.group(0)) if m else None


def as_speedup(value: Any) -> float | None:
    """2.3, "2.3", "2.3x", "2.3×" -> 2.3; None when it is not a positive number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        v = float(value)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*[x×]?\s*", str(value))
        if not m:
            return None
        v = float(m.group(1))
    return v if v > 0 and v == v and v != float("inf") else None
