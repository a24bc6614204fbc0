"""The task record and its JSONL form."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TaskRecord:
    """One task; ``source`` is a KernelBench-format reference (Model, get_inputs, get_init_inputs).

    ``baselines`` maps a GPU name to measured timings, e.g. ``{"NVIDIA H200": {"eager_ms": 3.1}}``; numbers
    from different GPUs are never mixed. ``input_spec`` lists every forward input at real size; empty when a
    loader could not know it without executing the source.
    """

    id: str
    source: str
    ops: list[str] = field(default_factory=list)
    category: str = ""
    categories: list[str] = field(default_factory=list)
    level: int = 0
    input_spec: list[dict[str, Any]] = field(default_factory=list)  # {name, shape, dtype}
    dtypes: list[str] = field(default_factory=list)
    output_shape: list[int] | None = None
    origin: str = ""  # synthesized | kernelbench | dataset:<file>
    split: str = "train"  # train | val | test
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    name: str = ""  # file stem, e.g. "s0-2-00042_Conv2d_Gelu"
    signature: str = ""  # normalised operator-graph signature (dedup key)
    proxy_sizes: dict[str, int] = field(default_factory=dict)  # constant -> small size for CPU checks
    batch_const: str | None = None  # the constant a real-size check may slice
    est_ms: float | None = None  # cost-model eager estimate on the target profile
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in d.items() if k in names}
        extra = {k: v for k, v in d.items() if k not in names}
        if "id" not in known or "source" not in known:
            raise ValueError(f"a task record needs 'id' and 'source' (got keys {sorted(d)[:12]})")
        rec = cls(**known)
        rec.meta = {**rec.meta, **extra}
        return rec


def write_jsonl(path: str | os.PathLike, records: Iterable[TaskRecord | dict]) -> int:
    """Write records atomically (temp file, then rename). Returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    n = 0
    with tmp.open("w") as f:
        for r in records:
            f.write(json.dumps(r.to_dict() if isinstance(r, TaskRecord) else r, sort_keys=True) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def iter_jsonl(path: str | os.PathLike, *, tolerate_partial_tail: bool = False) -> Iterator[dict]:
    """Yield JSON objects; a malformed line is an error naming the line, except a cut-off last line when
    ``tolerate_partial_tail`` (what an interrupted append leaves behind)."""
    lines = Path(path).read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as exc:
            if tolerate_partial_tail and i == len(lines) - 1:
                return
            raise ValueError(f"{path}:{i + 1}: not valid JSON ({exc.msg})") from None


def read_jsonl(path: str | os.PathLike) -> list[TaskRecord]:
    return [TaskRecord.from_dict(d) for d in iter_jsonl(path)]
