"""The run's tasks by ``tasks.source``: KernelBench-format problems under a directory (``dir``,
``tasks.py``), toy tasks of ``research.toyenv`` written as such problems (``toy``, ``toy_tasks.py``) or
records of a ``research.data`` dataset written as such problems (``data``, ``data_tasks.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .config import TasksConfig
from .data_tasks import data_tasks
from .tasks import Task, find_tasks
from .toy_tasks import toy_tasks


def load_tasks(cfg: TasksConfig, out_dir: str | Path, device: Callable[[], str | None]) -> list[Task]:
    """The run's tasks by ``cfg.source``. ``device()`` is the sandbox's device, asked only by sources whose
    problems depend on it (toy tasks and data records with proxy sizes are written at CPU sizes in CPU
    mode)."""
    if cfg.source == "toy":
        return toy_tasks(cfg, Path(out_dir) / "problems", device())
    if cfg.source == "data":
        return data_tasks(cfg, Path(out_dir) / "problems", device)
    return find_tasks(cfg)
