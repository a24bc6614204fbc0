"""A task and its selection (shared by every task source: ``task_sources.py``), and the ``dir`` source:
KernelBench-format problems under a directory, recursively, with their level and split."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import AgentConfigError, TasksConfig

_LEVEL = re.compile(r"level[_\- ]?(\d+)", re.I)
SPLIT_FOLDERS = ("train", "val", "test")  # folder names that give a dir task its split


@dataclass(frozen=True)
class Task:
    id: str  # relative path without .py, e.g. level1/19_ReLU
    path: Path
    level: str  # "1", "2", ... or "all" when no folder names a level
    split: str = "train"  # train | val | test, or a source's own name (toy: heldout_category)
    # What a task source knows beyond the problem file (toy tasks: the ``research.toyenv.ToyTask`` as the
    # policy is prompted with it and as it is judged; data tasks: the record; ``category`` where known);
    # policies read it in ``Policy.prepare``.
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def problem(self) -> str:
        return self.path.stem


def select(tasks: list[Task], cfg: TasksConfig, where: str) -> list[Task]:
    """The picked splits (``cfg.splits``; none: all, train/val/test first) of tasks already in their
    deterministic order, each cut to ``cfg.limit``. A picked split no task has is an error naming
    ``where``."""
    by_split: dict[str, list[Task]] = {}
    for t in tasks:
        by_split.setdefault(t.split, []).append(t)
    missing = [s for s in cfg.splits if s not in by_split]
    if missing:
        raise AgentConfigError(
            f"tasks.split={cfg.split}: {where} has no task of split {missing[0]!r} "
            f"(splits there: {sorted(by_split)})"
        )
    rank = {s: i for i, s in enumerate(SPLIT_FOLDERS)}
    order = cfg.splits or sorted(by_split, key=lambda s: (rank.get(s, len(rank)), s))
    return [t for s in order for t in (by_split[s][: cfg.limit] if cfg.limit else by_split[s])]


def _dir_split(rel_parent: Path, root: Path, default: str) -> str:
    """The nearest folder named train/val/test from the problem up to ``root`` itself, else ``default``."""
    for part in reversed((root.resolve().name, *rel_parent.parts)):
        if part in SPLIT_FOLDERS:
            return part
    return default


def find_tasks(cfg: TasksConfig) -> list[Task]:
    root = Path(cfg.problems_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"tasks.problems_dir={root}: not a directory")
    paths = sorted(p for p in root.rglob(cfg.pattern) if p.is_file() and not p.name.startswith("_"))
    if not paths:
        raise FileNotFoundError(f"tasks.problems_dir={root}: no problems matching {cfg.pattern!r} in it")
    tasks = []
    for p in paths:
        rel = p.relative_to(root).with_suffix("")
        m = _LEVEL.search(str(rel.parent)) or _LEVEL.search(str(root.resolve()))
        split = _dir_split(rel.parent, root, cfg.split_name)
        tasks.append(Task(id=rel.as_posix(), path=p, level=m.group(1) if m else "all", split=split))
    return select(tasks, cfg, f"tasks.problems_dir={root}")
