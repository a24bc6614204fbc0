"""Task discovery: KernelBench-format problems under a directory, recursively, with their level; or toy tasks
of ``research.toyenv`` written as such problems (``tasks.source=toy``, ``toy_tasks.py``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import TasksConfig

_LEVEL = re.compile(r"level[_\- ]?(\d+)", re.I)


@dataclass(frozen=True)
class Task:
    id: str  # relative path without .py, e.g. level1/19_ReLU
    path: Path
    level: str  # "1", "2", ... or "all" when no folder names a level
    # What a task source knows beyond the problem file (toy tasks: the ``research.toyenv.ToyTask`` as the
    # policy is prompted with it and as it is judged); policies read it in ``Policy.prepare``.
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def problem(self) -> str:
        return self.path.stem


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
        tasks.append(Task(id=rel.as_posix(), path=p, level=m.group(1) if m else "all"))
    return tasks[: cfg.limit] if cfg.limit else tasks


def load_tasks(cfg: TasksConfig, out_dir: str | Path, device: Callable[[], str | None]) -> list[Task]:
    """The run's tasks by ``cfg.source``. ``device()`` is the sandbox's device (asked only by sources whose
    problems depend on it: toy tasks are judged at CPU sizes in CPU mode)."""
    if cfg.source == "toy":
        from .toy_tasks import toy_tasks

        return toy_tasks(cfg, Path(out_dir) / "problems", device())
    return find_tasks(cfg)
