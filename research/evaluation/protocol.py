"""The study protocol, fixed before the final runs: which tasks train, which tune (``dev``) and which test,
written once to ``protocol.json`` and checked whenever it is read.

Splits of a task pool (``research.data`` ``TaskRecord``s, ``research.toyenv`` ``ToyTask``s or mappings with
``id``, ``source`` and ``categories``/``category``; tasks with the same ``signature`` are one task):

- ``test_heldout``: ``n_test_heldout`` tasks that use the held-out category. No other split has a task that
  uses it (the rest of its tasks are ``unused``).
- ``test_seen``, ``dev``, ``train``: the other tasks by a seeded hash rank: the first ``n_test_seen`` test,
  the next ``n_dev`` are the dev split (every choice: checkpoints, hyper-parameters, ablation settings),
  the rest train.
- ``kernelbench_l1``: KernelBench problems of one level (a checkout given by path, read, never copied)
  whose op chain no training task contains. A problem's ops are ``research.data.source_ops`` of its source
  (lower-cased, order ignored: ``source_ops`` lists them in AST-walk order, not dataflow order); it is
  dropped when some training task's ops include all of them, or when no op can be read from it.

Ranks are ``sha256(seed:id)``: the same seed and pool give the same splits in any order of the pool, and a
task added to the pool moves no other task. Test splits are touched once: ``record_evaluation`` (call it
before evaluating) refuses a second evaluation of a test split for the same run unless forced, and every
evaluation, forced or not, stays in the manifest. ``protocol_sha256`` covers everything else in the
manifest, so an edited split list is caught on load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research.data.decontam import source_ops
from research.data.ops import CATEGORIES

from ._jsonio import read_json, write_json
from .kernelbench import ProblemIndex

MIN_TEST_TASKS = 48
SCHEMA = "study-protocol/1"
TRAIN, DEV, TEST_SEEN, TEST_HELDOUT = "train", "dev", "test_seen", "test_heldout"
KERNELBENCH = "kernelbench_l1"
SPLITS = (TRAIN, DEV, TEST_SEEN, TEST_HELDOUT, KERNELBENCH)
TEST_SPLITS = (TEST_SEEN, TEST_HELDOUT, KERNELBENCH)


class ProtocolError(ValueError):
    """A protocol that cannot be made, read or used as asked (one line: what was wrong)."""


@dataclass
class ProtocolConfig:
    seed: int = 0
    heldout_category: str | None = None  # None: drawn by seed among the categories with enough tasks
    n_dev: int = 48
    n_test_seen: int = 48
    n_test_heldout: int = 48
    min_test_tasks: int = MIN_TEST_TASKS  # the study's floor; lower it only for smoke runs (recorded)
    kernelbench_dir: str | None = None  # a KernelBench checkout (e.g. ../shared/kernelbench); None: no split
    kernelbench_level: int = 1


@dataclass
class Protocol:
    config: ProtocolConfig
    heldout_category: str
    splits: dict[str, list[str]]  # split -> task ids (KernelBench: level<N>/<file stem>)
    hashes: dict[str, str]  # task id -> sha256 of its source
    unused: list[str] = field(default_factory=list)  # held-out-category tasks outside test_heldout
    duplicates: dict[str, str] = field(default_factory=dict)  # dropped id -> kept id of the same signature
    decontam: dict[str, Any] = field(default_factory=dict)
    # categories of test_seen tasks that no train task uses (should be empty: "seen" must mean seen)
    unseen_test_categories: list[str] = field(default_factory=list)
    evaluations: list[dict[str, Any]] = field(default_factory=list)

    def manifest(self) -> dict[str, Any]:
        body = {
            "schema": SCHEMA,
            "config": dataclasses.asdict(self.config),
            "heldout_category": self.heldout_category,
            "splits": self.splits,
            "sizes": {k: len(v) for k, v in self.splits.items()},
            "split_sha256": {k: _sha(json.dumps(sorted(v))) for k, v in self.splits.items()},
            "task_sha256": self.hashes,
            "unused": self.unused,
            "duplicates": self.duplicates,
            "decontam": self.decontam,
            "unseen_test_categories": self.unseen_test_categories,
        }
        return {**body, "protocol_sha256": _body_sha(body), "evaluations": self.evaluations}

    @property
    def sha256(self) -> str:
        return self.manifest()["protocol_sha256"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _body_sha(body: Mapping[str, Any]) -> str:
    return _sha(json.dumps(body, sort_keys=True))


def _get(task: Any, key: str, default: Any = None) -> Any:
    return task.get(key, default) if isinstance(task, Mapping) else getattr(task, key, default)


def _view(task: Any) -> tuple[str, tuple[str, ...], str, str]:
    """(id, categories, source, signature) of a pool task."""
    tid, source = _get(task, "id"), _get(task, "source")
    if not tid or source is None:
        raise ProtocolError(f"a pool task needs an id and a source, got {str(task)[:80]}")
    one = _get(task, "category")
    cats = tuple(_get(task, "categories") or ()) or ((one,) if one else ())
    return str(tid), cats, source, _get(task, "signature") or _sha(source)


def _rank(seed: int, key: str) -> str:
    return _sha(f"{seed}:{key}")


def _validate(cfg: ProtocolConfig) -> None:
    for name in ("n_test_seen", "n_test_heldout"):
        if getattr(cfg, name) < cfg.min_test_tasks:
            raise ProtocolError(
                f"{name}={getattr(cfg, name)} is below the {cfg.min_test_tasks} tasks a test split needs"
            )
    if cfg.n_dev < 1:
        raise ProtocolError(f"n_dev must be >= 1, got {cfg.n_dev}")
    if cfg.heldout_category is not None and cfg.heldout_category not in CATEGORIES:
        raise ProtocolError(f"unknown held-out category {cfg.heldout_category!r}; known: {list(CATEGORIES)}")


def _choose_category(cfg: ProtocolConfig, views: list[tuple], n_seen_needed: int) -> str:
    if cfg.heldout_category is not None:
        return cfg.heldout_category
    ok = []
    for c in CATEGORIES:
        inside = sum(c in v[1] for v in views)
        if inside >= cfg.n_test_heldout and len(views) - inside >= n_seen_needed:
            ok.append(c)
    if not ok:
        raise ProtocolError(
            f"no category has {cfg.n_test_heldout} tasks and leaves {n_seen_needed} others in a pool of "
            f"{len(views)} tasks: the pool is too small for the protocol"
        )
    return min(ok, key=lambda c: _rank(cfg.seed, f"category:{c}"))


def make_protocol(tasks: Iterable[Any], cfg: ProtocolConfig | None = None) -> Protocol:
    """The protocol's splits of a task pool (module docstring); raises ``ProtocolError`` in one line."""
    cfg = cfg or ProtocolConfig()
    _validate(cfg)
    views, duplicates, seen, taken = [], {}, {}, set()
    for v in sorted((_view(t) for t in tasks), key=lambda v: v[0]):
        if v[0] in taken:
            raise ProtocolError(f"task id {v[0]!r} appears twice in the pool")
        taken.add(v[0])
        if v[3] in seen:
            duplicates[v[0]] = seen[v[3]]
            continue
        seen[v[3]] = v[0]
        views.append(v)
    n_seen_needed = cfg.n_test_seen + cfg.n_dev + 1
    category = _choose_category(cfg, views, n_seen_needed)
    heldout = sorted((v for v in views if category in v[1]), key=lambda v: _rank(cfg.seed, v[0]))
    others = sorted((v for v in views if category not in v[1]), key=lambda v: _rank(cfg.seed, v[0]))
    if len(heldout) < cfg.n_test_heldout:
        raise ProtocolError(
            f"held-out category {category!r} has {len(heldout)} tasks in the pool; the protocol needs "
            f"{cfg.n_test_heldout}"
        )
    if len(others) < n_seen_needed:
        raise ProtocolError(
            f"{len(others)} tasks outside category {category!r}; test_seen + dev + train need at least "
            f"{n_seen_needed}"
        )
    ids = lambda vs: sorted(v[0] for v in vs)  # noqa: E731
    a, b = cfg.n_test_seen, cfg.n_test_seen + cfg.n_dev
    splits = {
        TRAIN: ids(others[b:]),
        DEV: ids(others[a:b]),
        TEST_SEEN: ids(others[:a]),
        TEST_HELDOUT: ids(heldout[: cfg.n_test_heldout]),
    }
    train_sources = {v[0]: v[2] for v in others[b:]}
    decontam: dict[str, Any] = {"ran": False}
    if cfg.kernelbench_dir:
        kb = kernelbench_split(train_sources, cfg.kernelbench_dir, cfg.kernelbench_level)
        splits[KERNELBENCH], decontam = kb
    train_cats = {c for v in others[b:] for c in v[1]}
    unseen = sorted({c for v in others[:a] for c in v[1]} - train_cats)
    placed = {i for s in splits.values() for i in s}
    return Protocol(
        config=cfg,
        heldout_category=category,
        splits=splits,
        hashes={v[0]: _sha(v[2]) for v in views if v[0] in placed},
        unused=ids(heldout[cfg.n_test_heldout :]),
        duplicates=duplicates,
        decontam=decontam,
        unseen_test_categories=unseen,
    )


def _ops(source: str) -> frozenset[str]:
    try:
        return frozenset(op.lower() for op in source_ops(source))
    except SyntaxError:
        return frozenset()


def kernelbench_split(train: Mapping[str, str], problems_dir: str, level: int = 1) -> tuple[list[str], dict]:
    """(problem keys whose op set no training task's op set includes, the decontamination report);
    ``train``: training task id -> source."""
    try:
        index = ProblemIndex(problems_dir, [level])
    except FileNotFoundError as exc:  # KernelBenchNotFound: already one line
        raise ProtocolError(str(exc)) from None
    train_ops = {tid: _ops(s) for tid, s in sorted(train.items())}
    kept, dropped = [], []
    for p in index.problems:
        ops = _ops(p.path.read_text())
        inside = next((tid for tid, t in train_ops.items() if ops and ops <= t), None)
        if not ops:
            dropped.append({"problem": p.key, "ops": [], "reason": "no ops read from the source"})
        elif inside is not None:
            dropped.append(
                {
                    "problem": p.key,
                    "ops": sorted(ops),
                    "reason": "ops inside a training task",
                    "train_task": inside,
                }
            )
        else:
            kept.append(p.key)
    report = {
        "ran": True,
        "dir": str(index.root),
        "level": level,
        "rule": "drop a problem whose source_ops (lower-cased, as a set) a training task's ops include",
        "problems": len(index.problems),
        "kept": len(kept),
        "dropped": dropped,
    }
    return sorted(kept), report


def split_tasks(protocol: Protocol, tasks: Iterable[Any]) -> dict[str, list[Any]]:
    """The pool's task objects by protocol split (not KernelBench), each checked against its recorded
    source hash: a task that changed since the protocol was fixed is an error."""
    by_id = {}
    for t in tasks:
        tid, _, source, _ = _view(t)
        if tid in protocol.hashes and _sha(source) != protocol.hashes[tid]:
            raise ProtocolError(f"task {tid!r} changed since the protocol was fixed (source hash differs)")
        by_id[tid] = t
    out = {}
    for split in (TRAIN, DEV, TEST_SEEN, TEST_HELDOUT):
        missing = [i for i in protocol.splits[split] if i not in by_id]
        if missing:
            raise ProtocolError(
                f"{len(missing)} {split} tasks of the protocol are not in the pool (e.g. {missing[0]})"
            )
        out[split] = [by_id[i] for i in protocol.splits[split]]
    return out


def _from_manifest(m: Mapping[str, Any]) -> Protocol:
    return Protocol(
        config=ProtocolConfig(**m["config"]),
        heldout_category=m["heldout_category"],
        splits={k: list(v) for k, v in m["splits"].items()},
        hashes=dict(m["task_sha256"]),
        unused=list(m["unused"]),
        duplicates=dict(m["duplicates"]),
        decontam=dict(m["decontam"]),
        unseen_test_categories=list(m["unseen_test_categories"]),
        evaluations=list(m.get("evaluations") or []),
    )


def load_protocol(path: str | os.PathLike) -> Protocol:
    path = Path(path)
    m = read_json(path, SCHEMA, ProtocolError, "no protocol", "manifest")
    try:
        protocol = _from_manifest(m)
    except (KeyError, TypeError) as exc:
        raise ProtocolError(f"{path}: malformed protocol manifest ({exc})") from None
    if protocol.sha256 != m.get("protocol_sha256"):
        raise ProtocolError(f"{path} was edited after the protocol was fixed (protocol_sha256 differs)")
    return protocol


def _write(path: Path, data: Mapping[str, Any]) -> None:
    write_json(path, data, indent=1, sort_keys=True)


def write_protocol(protocol: Protocol, path: str | os.PathLike) -> Path:
    """Write ``protocol.json``; an existing one must be the same protocol (its evaluations are kept): a
    protocol is fixed once, never silently replaced."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        if path.exists():
            old = load_protocol(path)
            if old.sha256 != protocol.sha256:
                raise ProtocolError(
                    f"{path} already fixes another protocol ({old.sha256[:12]} vs {protocol.sha256[:12]}); "
                    "choose another path"
                )
            return path
        _write(path, protocol.manifest())
    return path


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock beside the manifest, so two evaluations starting at once cannot both pass."""
    with open(path.with_suffix(path.suffix + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def record_evaluation(path: str | os.PathLike, split: str, run: str, force: bool = False) -> dict | None:
    """Mark test split ``split`` as evaluated for ``run`` in the manifest (call it before evaluating: a
    look that crashed is still a look). A second one for the same run refuses unless ``force``; forced
    ones are recorded as such. Train and dev splits are not guarded (None)."""
    if split not in SPLITS:
        raise ProtocolError(f"unknown split {split!r}; known: {list(SPLITS)}")
    if split not in TEST_SPLITS:
        return None
    if not run:
        raise ProtocolError("record_evaluation needs a run name")
    path = Path(path)
    if not path.is_file():
        raise ProtocolError(f"no protocol at {path}")
    with _locked(path):
        protocol = load_protocol(path)
        if split not in protocol.splits:
            raise ProtocolError(f"protocol {path} has no {split} split")
        before = [e for e in protocol.evaluations if e["split"] == split and e["run"] == run]
        if before and not force:
            raise ProtocolError(
                f"test split {split} was already evaluated for run {run!r} at {before[0]['at']}; a test "
                "split is evaluated once per run (force=True overrides, and is recorded)"
            )
        entry = {
            "split": split,
            "run": run,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "forced": bool(before),
            "protocol_sha256": protocol.sha256,
        }
        protocol.evaluations.append(entry)
        _write(path, protocol.manifest())
    return entry
