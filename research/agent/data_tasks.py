"""Records of a ``research.data`` dataset as agent tasks (``tasks.source=data``): each record's
KernelBench-format source written as a problem file ``<problems_dir>/<split>/<name>.py`` the workspace holds.

``tasks.path`` is a ``python -m experiments.synthesize`` output directory (its ``tasks.jsonl``, read exactly
by ``load_synthesized``) or a JSONL/JSON/Parquet file or directory of them (``load_dataset`` with the column
map ``tasks.columns``). A column named like a record field (``id``, ``split``, ``level``, ``name``,
``proxy_sizes``, ...) that the map does not name is that field, so records written by ``write_jsonl`` (or the
same rows as Parquet) load back as they were. Names come from the record's ``name`` (else ``id``), made
filesystem-safe and unique per split in record-id order, so the ids ``<split>/<name>`` are stable across runs
(and a rerun resumes). In CPU mode a record with ``proxy_sizes`` is written at those sizes (the module-level
size constants rewritten as the synthesis' CPU checks do, ``research.data.checks.apply_overrides``); a record
without them (external sets, KernelBench) is written as it is, at real size (``Task.meta["sizes"]`` says
which).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from research.data import ColumnMap, TaskRecord, load_dataset, load_synthesized
from research.data.checks import apply_overrides

from .config import AgentConfigError, TasksConfig
from .tasks import Task, select

SYNTHESIZED = "tasks.jsonl"  # what experiments.synthesize exports into its out_dir
_MAPPED = ("source", "id", "ops", "category", "level", "split")  # ColumnMap's own fields
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_TEXT = ("id", "name", "split", "category", "origin", "signature", "batch_const")
_KEEP = object()  # a value left in meta: it does not fit the record field


def data_tasks(cfg: TasksConfig, problems_dir: str | Path, device: Callable[[], str | None]) -> list[Task]:
    where = f"tasks.path={cfg.path}"
    records = read_records(cfg)
    if not records:
        raise AgentConfigError(f"{where}: no task records in it")
    order = sorted(range(len(records)), key=lambda i: (records[i].id, i))
    taken: set[tuple[str, str]] = set()
    tasks = []
    for i in order:
        rec = records[i]
        split = safe_name(str(rec.split or "").strip() or "train")
        name = unique(safe_name(rec.name or rec.id), split, taken)
        meta: dict[str, Any] = {"record": rec, "record_id": rec.id}
        if rec.category:
            meta["category"] = rec.category
        level = str(rec.level) if isinstance(rec.level, int) and rec.level > 0 else "all"
        path = Path(problems_dir) / split / f"{name}.py"
        tasks.append(Task(id=f"{split}/{name}", path=path, level=level, split=split, meta=meta))
    chosen = select(tasks, cfg, where)
    # the sandbox's device only matters (and the sandbox is only started) when some record has CPU sizes
    cpu = any(t.meta["record"].proxy_sizes for t in chosen) and device() == "cpu"
    for t in chosen:
        _write(t, cpu, where)
    return chosen


def read_records(cfg: TasksConfig) -> list[TaskRecord]:
    """The records at ``cfg.path``; a user's mistake (no file, no source, a bad column) is one line."""
    path = Path(cfg.path).expanduser()
    where = f"tasks.path={cfg.path}"
    if not path.exists():
        raise FileNotFoundError(f"{where}: no such file or directory")
    synthesized = path.is_dir() and (path / SYNTHESIZED).is_file()
    if path.is_dir() and not synthesized and (path / "candidates.jsonl").is_file():
        raise FileNotFoundError(f"{where}: no {SYNTHESIZED}: synthesis has not finished there (resume it)")
    if synthesized and cfg.columns:
        raise AgentConfigError(f"tasks.columns: {where} is a synthesis output (its records need no map)")
    columns = column_map(cfg.columns)
    try:
        if synthesized:
            return load_synthesized(path)
        records = load_dataset(path, columns)
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no .jsonl, .json or .parquet dataset file in it") from None
    except (ValueError, KeyError, SyntaxError, ImportError) as exc:
        raise AgentConfigError(f"{where}: {_message(exc)}") from None
    for rec in records:
        if "name" not in rec.meta and "name" not in cfg.columns:
            rec.name = rec.id  # not load_dataset's <file>-<row>: the dataset's own id names the file
        promote(rec, set(cfg.columns) | {"source", "ops"})
    return records


def column_map(columns: dict[str, str]) -> ColumnMap:
    fields = [f.name for f in dataclasses.fields(TaskRecord) if f.name != "meta"]
    unknown = sorted(set(columns) - set(fields))
    if unknown:
        raise AgentConfigError(f"tasks.columns: {unknown[0]!r} is no task record field (fields: {fields})")
    own = {k: v for k, v in columns.items() if k in _MAPPED}
    return ColumnMap(**own, extra={k: v for k, v in columns.items() if k not in _MAPPED})


def promote(rec: TaskRecord, mapped: set[str]) -> None:
    """Columns named like record fields (kept in ``rec.meta`` by ``load_dataset``) become those fields."""
    for f in dataclasses.fields(TaskRecord):
        if f.name in mapped or f.name == "meta" or f.name not in rec.meta:
            continue
        value = _coerce(f.name, rec.meta[f.name])
        if value is not _KEEP:
            setattr(rec, f.name, value)
            del rec.meta[f.name]
    inner = rec.meta.get("meta")
    if isinstance(inner, dict) and "meta" not in mapped:  # a record's own meta, written by write_jsonl
        del rec.meta["meta"]
        rec.meta = {**{k: v for k, v in inner.items() if v is not None}, **rec.meta}


def _coerce(name: str, value: Any) -> Any:
    if value is None:
        return _KEEP
    if name == "level":
        try:
            return int(value)
        except (TypeError, ValueError):
            return _KEEP  # e.g. "easy": not a level number, so it stays a column in meta
    if name in _TEXT:
        return str(value)
    if name == "proxy_sizes":  # Parquet gives every row the union of keys, absent ones as null
        return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else _KEEP
    return value


def safe_name(text: str) -> str:
    """A file or folder name on any filesystem; never hidden or ``_``-prefixed (``find_tasks`` skips them)."""
    return _UNSAFE.sub("_", text).strip("._-")[:120] or "task"


def unique(name: str, split: str, taken: set[tuple[str, str]]) -> str:
    """``name``, or ``name-2``, ``name-3``, ... if taken in ``split`` (case-insensitively: macOS, Windows)."""
    out, k = name, 1
    while (split, out.lower()) in taken:
        k += 1
        out = f"{name}-{k}"
    taken.add((split, out.lower()))
    return out


def _write(task: Task, cpu: bool, where: str) -> None:
    rec: TaskRecord = task.meta["record"]
    text, sizes = rec.source, "real"
    if cpu and rec.proxy_sizes:
        try:
            text, sizes = apply_overrides(rec.source, rec.proxy_sizes), "proxy"
        except (ValueError, SyntaxError) as exc:
            raise AgentConfigError(f"{where}: record {rec.id}: proxy_sizes do not apply ({exc})") from None
    task.meta["sizes"] = sizes
    task.path.parent.mkdir(parents=True, exist_ok=True)
    if not task.path.is_file() or task.path.read_text() != text:
        task.path.write_text(text)


def _message(exc: BaseException) -> str:
    msg = str(exc.args[0]) if exc.args else type(exc).__name__
    if isinstance(exc, KeyError) and " " not in msg:  # load_dataset's row[column] on a row without it
        return f"a row has no column {msg!r} (a tasks.columns entry names it)"
    if isinstance(exc, SyntaxError):
        return f"a record's source is not Python ({exc.msg}, line {exc.lineno})"
    return " ".join(msg.split())
