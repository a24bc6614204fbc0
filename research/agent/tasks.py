"""Task discovery: KernelBench-format problems under a directory, recursively, with their level."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .config import TasksConfig

_LEVEL = re.compile(r"level[_\- ]?(\d+)", re.I)


@dataclass(frozen=True)
class Task:
    id: str  # relative path without .py, e.g. level1/19_ReLU
    path: Path
    level: str  # "1", "2", ... or "all" when no folder names a level

    @property
    def problem(self) -> str:
        return self.path.stem


def find_tasks(cfg: TasksConfig) -> list[Task]:
    root = Path(cfg.problems_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"tasks.problems_dir {root} is not a directory")
    paths = sorted(p for p in root.rglob(cfg.pattern) if p.is_file() and not p.name.startswith("_"))
    if not paths:
        raise FileNotFoundError(f"no problems matching {cfg.pattern!r} under {root}")
    tasks = []
    for p in paths:
        rel = p.relative_to(root).with_suffix("")
        m = _LEVEL.search(str(rel.parent)) or _LEVEL.search(str(root.resolve()))
        tasks.append(Task(id=rel.as_posix(), path=p, level=m.group(1) if m else "all"))
    return tasks[: cfg.limit] if cfg.limit else tasks
