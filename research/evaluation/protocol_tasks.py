"""A study protocol applied to the agent loop's tasks (``research.agent.Task``): which of a task source's
tasks are ``train``, ``dev`` and the test splits, each checked against the source hash the protocol recorded
(``split_tasks``: a task changed since the protocol was fixed is a ``ProtocolError``).

A task is seen by the protocol as the object the protocol was made from: a data task as its
``research.data`` record (record id and source as synthesized, not the CPU-sized problem file), a toy task as
its ``ToyTask``; a directory task as its id (relative path) and its problem file's text. The tasks returned
carry their protocol split (``Task.split``), so trajectories and results say it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from .protocol import DEV, TEST_HELDOUT, TEST_SEEN, TRAIN, Protocol, ProtocolError, split_tasks

POOL_SPLITS = (TRAIN, DEV, TEST_SEEN, TEST_HELDOUT)  # the splits of the task source (not KernelBench's)
TRAINING_SPLITS = (TRAIN, DEV)  # all the training pipeline may hold: rollouts on train, evaluation on dev


def protocol_view(task: Any) -> dict[str, Any]:
    """``{id, source, categories, task}``: the agent task as the protocol's pool saw it."""
    meta = getattr(task, "meta", {}) or {}
    rec, toy = meta.get("record"), meta.get("toy_task")
    if rec is not None:
        one = getattr(rec, "category", None)
        cats = tuple(getattr(rec, "categories", None) or ()) or ((one,) if one else ())
        return {"id": str(rec.id), "source": rec.source, "categories": cats, "task": task}
    if toy is not None:
        return {"id": str(toy.id), "source": toy.source, "categories": tuple(toy.categories), "task": task}
    cat = meta.get("category")
    return {"id": task.id, "source": task.path.read_text(), "categories": (cat,) if cat else (), "task": task}


def protocol_splits(
    tasks: Iterable[Any], protocol: Protocol, keep: Sequence[str] = POOL_SPLITS
) -> dict[str, list[Any]]:
    """The agent tasks of the protocol splits ``keep`` (split -> tasks in the protocol's order, each with
    ``split`` set to its protocol split); every split of ``keep`` must be complete in ``tasks``."""
    bad = [s for s in keep if s not in POOL_SPLITS]
    if bad:
        raise ProtocolError(
            f"split {bad[0]!r} is not a split of the task source's tasks ({list(POOL_SPLITS)})"
        )
    by_split = split_tasks(protocol, [protocol_view(t) for t in tasks])
    return {s: [_relabel(v["task"], s) for v in by_split[s]] for s in keep}


def _relabel(task: Any, split: str) -> Any:
    return dataclasses.replace(task, split=split) if task.split != split else task
