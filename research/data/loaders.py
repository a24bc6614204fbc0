"""Loaders: a KernelBench problems directory (read unchanged), local JSONL/Parquet datasets of
KernelBench-format tasks with a configurable column mapping (e.g. CUDA-Agent-Ops-6K once downloaded), and
our own synthesized datasets."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .decontam import source_ops, source_signature
from .records import TaskRecord, iter_jsonl, read_jsonl

SOURCE_ALIASES = ("source", "code", "reference", "pytorch_code", "python_code", "module_code", "content")
_KB_FILE = re.compile(r"^(\d+)_(.+)\.py$")
_CATEGORY_HINTS = (  # lower-cased call/module names -> library category (best effort for external sources)
    ("transformer", ("multiheadattention", "transformer", "rotary", "swiglu", "rmsnorm")),
    ("attention", ("scaled_dot_product_attention", "softmax", "log_softmax", "softmin")),
    ("conv", ("conv", "pool", "interpolate", "upsample")),
    ("matmul", ("linear", "matmul", "bmm", "einsum", "addmm", "mm", "bilinear", "matmult")),
    ("normalization", ("norm", "normalize")),
    ("loss", ("loss", "cross_entropy", "kl_div", "cosine_similarity")),
    ("scan", ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp")),
    ("indexing", ("gather", "scatter", "index_select", "embedding", "topk", "sort", "masked_fill", "where")),
    ("reduction", ("sum", "mean", "max", "min", "argmax", "argmin", "std", "var", "logsumexp", "prod")),
)


def guess_category(ops: list[str]) -> str:
    low = [o.lower() for o in ops]
    for category, hints in _CATEGORY_HINTS:
        if any(h in o for o in low for h in hints):
            return category
    return "elementwise" if ops else ""


@dataclass
class ColumnMap:
    """Which column holds which record field. ``source=None`` tries common names (code, source, ...)."""

    source: str | None = None
    id: str | None = None
    ops: str | None = "ops"
    category: str | None = None
    level: str | None = None
    split: str | None = None
    keep_other_columns: bool = True
    extra: dict[str, str] = field(default_factory=dict)  # record field -> column for anything else


def _read_rows(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return list(iter_jsonl(path))
    if suffix == ".json":
        data = json.loads(path.read_text())
        return data if isinstance(data, list) else data.get("data", [])
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError(
                f"reading {path.name} needs pyarrow (pinned in requirements.txt): "
                "`pip install -r requirements.txt`, or convert the file to JSONL"
            ) from None
        return pq.read_table(path).to_pylist()
    raise ValueError(f"{path}: unsupported dataset file type {suffix!r} (.jsonl, .json, .parquet)")


def _as_list(v) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        try:
            parsed = json.loads(v)
            return [str(x) for x in parsed] if isinstance(parsed, list) else [v]
        except json.JSONDecodeError:
            return [s.strip() for s in re.split(r"[,;|]", v) if s.strip()]
    return [str(x) for x in v]


def load_dataset(
    path: str | Path, columns: ColumnMap | None = None, origin: str | None = None
) -> list[TaskRecord]:
    """Rows of a JSONL/JSON/Parquet file (or every such file in a directory) as task records."""
    columns = columns or ColumnMap()
    path = Path(path).expanduser()
    files = (
        sorted(p for p in path.iterdir() if p.suffix in (".jsonl", ".json", ".parquet"))
        if path.is_dir()
        else [path]
    )
    if not files or not all(f.exists() for f in files):
        raise FileNotFoundError(f"no dataset file at {path}")
    records = []
    for f in files:
        rows = _read_rows(f)
        if not rows:
            continue
        src_col = columns.source or next((c for c in SOURCE_ALIASES if c in rows[0]), None)
        if src_col is None or src_col not in rows[0]:
            raise KeyError(
                f"{f.name}: no source column (tried {columns.source or SOURCE_ALIASES}); "
                f"columns are {sorted(rows[0])}. Set the column mapping's 'source'."
            )
        used = {
            src_col,
            columns.id,
            columns.ops,
            columns.category,
            columns.level,
            columns.split,
            *columns.extra.values(),
        }
        for i, row in enumerate(rows):
            src = row.get(src_col)
            if not isinstance(src, str) or not src.strip():
                raise ValueError(f"{f.name} row {i}: empty or non-text source in column {src_col!r}")
            ops = _as_list(row.get(columns.ops)) if columns.ops and columns.ops in row else source_ops(src)
            rec = TaskRecord(
                id=str(row[columns.id]) if columns.id else f"{f.stem}-{i:05d}",
                source=src,
                ops=ops,
                category=str(row[columns.category]) if columns.category else guess_category(ops),
                level=int(row[columns.level]) if columns.level and row.get(columns.level) is not None else 0,
                split=str(row[columns.split]) if columns.split else "train",
                origin=origin or f"dataset:{f.name}",
                name=f"{f.stem}-{i:05d}",
                signature=source_signature(src),
            )
            for fld, col in columns.extra.items():
                setattr(rec, fld, row.get(col))
            if columns.keep_other_columns:
                rec.meta = {k: v for k, v in row.items() if k not in used and _jsonable(v)}
            records.append(rec)
    return records


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def _level_dirs(root: Path) -> list[tuple[int, Path]]:
    for base in (root, root / "KernelBench"):
        dirs = [(int(p.name[5:]), p) for p in base.glob("level*") if p.is_dir() and p.name[5:].isdigit()]
        if dirs:
            return sorted(dirs)
    m = re.fullmatch(r"level(\d+)", root.name)
    if m:
        return [(int(m.group(1)), root)]
    return []


def load_kernelbench(root: str | Path, levels: list[int] | None = None) -> list[TaskRecord]:
    """Problems of a KernelBench checkout (repo root, its KernelBench/ dir, or one level dir), unchanged."""
    root = Path(root).expanduser()
    dirs = _level_dirs(root)
    if not dirs:
        raise FileNotFoundError(f"{root}: no KernelBench level directories (level1, level2, ...) found")
    records = []
    for level, d in dirs:
        if levels and level not in levels:
            continue
        files = sorted(
            (p for p in d.glob("*.py") if _KB_FILE.match(p.name)),
            key=lambda p: int(_KB_FILE.match(p.name).group(1)),
        )
        for p in files:
            num, title = _KB_FILE.match(p.name).groups()
            src = p.read_text()
            try:
                ops = source_ops(src)
            except SyntaxError:
                ops = []
            rec = TaskRecord(id=f"kb-L{level}-{int(num)}", source=src, ops=ops, category=guess_category(ops))
            rec.level, rec.origin, rec.split, rec.name = level, "kernelbench", "test", p.stem
            rec.signature = source_signature(src) if ops else ""
            rec.meta = {"path": str(p), "title": title}
            records.append(rec)
    return records


def load_synthesized(out_dir: str | Path) -> list[TaskRecord]:
    """A dataset written by ``experiments.synthesize`` (its ``tasks.jsonl``)."""
    path = Path(out_dir).expanduser() / "tasks.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: synthesis has not finished there (resume it first)")
    return read_jsonl(path)


def curriculum(records: list[TaskRecord], levels: list[int] | None = None) -> list[TaskRecord]:
    """Tasks ordered for a curriculum: by level (single ops first), then op count, then estimated runtime."""
    chosen = [r for r in records if not levels or r.level in levels]
    return sorted(chosen, key=lambda r: (r.level, len(r.ops), r.est_ms or 0.0, r.id))
