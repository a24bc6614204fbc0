"""Toy tasks of ``research.toyenv`` as agent tasks: each reference written as a KernelBench-format problem
file the workspace holds (``model.py``), judged like any problem by the sandbox.

The task set is ``make_tasks`` with only the asked splits' quotas (``limit`` tasks each): splits are filled
in a fixed candidate stream order, so these are the first ``limit`` tasks of each split of every config
with the same seed and held-out category (the RL pipeline's ``toy_cpu`` preset holds out 4, its GPU
demonstration 8).
No decontamination here: it drops nothing from the default stream (docs/toyenv.md) and needs KernelBench.
In CPU mode the problem is written at ``cpu_size(task, cpu_rows)``, the size the RL pipeline judges there;
the policy is still prompted with the real task (``Task.meta["toy_task"]``), as in training.
"""

from __future__ import annotations

from pathlib import Path

from research.toyenv import HELDOUT, SPLITS, TEST, TRAIN, ToyTaskConfig, cpu_size, make_tasks

from .config import AgentConfigError, TasksConfig
from .tasks import Task

LEVELS = {TRAIN: "train", TEST: "test", HELDOUT: "heldout"}  # Table 1 rows of the summary


def toy_tasks(cfg: TasksConfig, problems_dir: str | Path, device: str | None) -> list[Task]:
    """The first ``cfg.limit`` tasks of each picked split (``cfg.split``, default ``cfg.toy_split``)."""
    splits = cfg.splits or [cfg.toy_split]
    for name, split in [("tasks.toy_split", cfg.toy_split)] + [("tasks.split", s) for s in cfg.splits]:
        if split not in SPLITS:
            raise AgentConfigError(f"{name}: toy tasks have splits {SPLITS}, got {split!r}")
    quotas = {TRAIN: 0, TEST: 0, HELDOUT: 0, **dict.fromkeys(splits, cfg.limit)}
    task_cfg = ToyTaskConfig(
        seed=cfg.toy_seed,
        num_train=quotas[TRAIN],
        num_test=quotas[TEST],
        num_heldout=quotas[HELDOUT],
        heldout_category=cfg.toy_heldout_category,
        decontam_dir=None,
    )
    made = make_tasks(task_cfg)
    out = []
    for split in splits:
        root = Path(problems_dir) / LEVELS[split]
        root.mkdir(parents=True, exist_ok=True)
        for task in made.split(split):
            judged = cpu_size(task, cfg.cpu_rows) if device == "cpu" else task
            path = root / f"{task.id}.py"
            path.write_text(judged.source)
            meta = {"toy_task": task, "toy_judged": judged, "category": (task.categories or ("",))[0]}
            out.append(Task(id=task.id, path=path, level=LEVELS[split], split=split, meta=meta))
    return out
