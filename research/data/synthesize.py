"""The synthesis pipeline: generate -> static filters -> execution checks (worker pool) -> optional GPU
runtime window -> commit in a fixed order -> export dataset, manifest and plot.

Determinism and resumability: each mix bucket (1..5 ops, modules) has its own candidate stream indexed by
j, and its quota of kept tasks. Checks run speculatively in parallel, but results are committed to
``candidates.jsonl`` strictly in (bucket, j) order, and every keep/drop decision (dedup included) is taken at
commit time from committed state only. So the kept set is the first quota of passing candidates of each
stream whatever the parallelism, and an interrupted run resumes from the log with the same result.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .candidates import Candidate, drop_reason, make_candidate, task_id
from .compose import BUCKETS
from .config import SynthesisConfig, SynthesisConfigError
from .decontam import EvalIndex
from .gpu_filter import Timer, apply_window, make_timer
from .ops import LIBRARY, Reject
from .pool import WorkerPool
from .records import TaskRecord, iter_jsonl, write_jsonl
from .report import write_manifest
from .splits import validate

LIBRARY_VERSION = "ops-v1"
MAX_CANDIDATES_PER_TASK = 60  # a bucket that needs more than this many candidates per kept task is stuck


def quotas(cfg: SynthesisConfig) -> dict[str, int]:
    """Exact kept counts per bucket by largest remainder, so the kept mix is the configured mix."""
    weights = [*cfg.mix.op_count_weights, cfg.mix.module_weight]
    if len(weights) != len(BUCKETS) or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise SynthesisConfigError(
            f"mix needs 5 non-negative op-count weights and a module weight, got {weights}"
        )
    total = sum(weights)
    raw = [cfg.num_tasks * w / total for w in weights]
    counts = [math.floor(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: (counts[i] - raw[i], i))[: cfg.num_tasks - sum(counts)]:
        counts[i] += 1
    return dict(zip(BUCKETS, counts))


def fingerprint(cfg: SynthesisConfig) -> dict[str, Any]:
    """Everything that decides which tasks a run produces (not: num_tasks, out_dir, workers, progress)."""
    return {
        "library": LIBRARY_VERSION,
        "ops": sorted(LIBRARY),
        "seed": cfg.seed,
        "mix": dataclasses.asdict(cfg.mix),
        "filters": {k: v for k, v in dataclasses.asdict(cfg.filters).items() if k not in ("timeout_s",)},
        "split": dataclasses.asdict(cfg.split),
        "profile": dataclasses.asdict(cfg.profile),
    }


class _State:
    """What the commit log says so far."""

    def __init__(self, log: Path):
        self.log = log
        self.next_j = dict.fromkeys(BUCKETS, 0)
        self.kept: dict[str, list[TaskRecord]] = {b: [] for b in BUCKETS}
        self.sigs: dict[str, str] = {}
        self.drops: Counter = Counter()
        self.dropped: list[dict] = []
        if log.exists():
            good = []
            for entry in iter_jsonl(log, tolerate_partial_tail=True):
                self._apply(entry)
                good.append(json.dumps(entry, sort_keys=True))
            log.write_text("".join(line + "\n" for line in good))  # drop a cut-off tail line

    def _apply(self, e: dict) -> None:
        b = e["bucket"]
        self.next_j[b] = e["j"] + 1
        if e["status"] == "kept":
            rec = TaskRecord.from_dict(e["record"])
            self.kept[b].append(rec)
            self.sigs[rec.signature] = rec.id
        else:
            self.drops[e["reason"]] += 1
            self.dropped.append({k: e[k] for k in ("id", "reason", "detail") if k in e})

    def commit(self, entry: dict, fh) -> None:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")
        self._apply(entry)


def _check_config(cfg: SynthesisConfig, out: Path) -> None:
    validate(cfg.split)
    if cfg.num_tasks < 1:
        raise SynthesisConfigError(f"num_tasks must be >= 1, got {cfg.num_tasks}")
    f = cfg.filters
    if not 0 < f.runtime_min_ms < f.runtime_max_ms:
        raise SynthesisConfigError(
            f"filters.runtime_min_ms..runtime_max_ms [{f.runtime_min_ms}, {f.runtime_max_ms}] ms is empty"
        )
    if f.compile_backend not in ("none", "eager", "aot_eager", "inductor"):
        raise SynthesisConfigError(
            f"filters.compile_backend must be none, eager, aot_eager or inductor, got {f.compile_backend!r}"
        )
    unknown = set(cfg.mix.exclude_ops) - set(LIBRARY)
    if unknown:
        raise SynthesisConfigError(f"exclude_ops names unknown ops {sorted(unknown)}")
    cfg_file = out / "config.json"
    fp = fingerprint(cfg)
    if cfg_file.exists():
        old = json.loads(cfg_file.read_text())
        if not cfg.resume:
            raise FileExistsError(
                f"{out} already holds a dataset; pass resume=true or choose another out_dir"
            )
        if old != fp:
            diff = sorted(k for k in fp if old.get(k) != fp[k])
            raise SynthesisConfigError(
                f"{out} was synthesized with a different config (differs in: {diff}); resuming would mix "
                "datasets. Choose another out_dir or restore the original settings."
            )
    else:
        out.mkdir(parents=True, exist_ok=True)
        cfg_file.write_text(json.dumps(fp, indent=1, sort_keys=True))


def _write_task(out: Path, rec: TaskRecord) -> None:
    path = out / "tasks" / f"{rec.name}.py"
    tmp = path.with_suffix(".py.tmp")
    tmp.write_text(rec.source)
    os.replace(tmp, path)


def synthesize(cfg: SynthesisConfig, *, timer: Timer | None = None, stop_after: int | None = None) -> dict:
    """Run (or resume) synthesis into ``cfg.out_dir``; returns the manifest.

    ``timer``: a GPU timer for the runtime-window stage (default: from ``cfg.filters.gpu`` when enabled).
    ``stop_after``: stop after this many commits without exporting, as an interruption would (tests)."""
    t_start = time.monotonic()
    out = Path(cfg.out_dir).expanduser()
    _check_config(cfg, out)
    (out / "tasks").mkdir(exist_ok=True)
    f = cfg.filters
    evals = EvalIndex.from_dir(f.decontam_dir) if f.decontam_dir else None
    quota = quotas(cfg)
    state = _State(out / "candidates.jsonl")
    own_timer = timer is None and f.gpu.enabled
    if own_timer:
        timer = make_timer(f.gpu)
    run = _Run(cfg, out, state, quota, evals, timer, _progress_bar(cfg, state))
    try:
        if not run.unfinished():  # finished already: export only, no workers
            return _export(cfg, out, state, quota, evals, run.stats, time.monotonic() - t_start)
        target = "research.data.checks:check_task"
        log_path = out / "workers.log"
        with WorkerPool(target, run.workers, f.timeout_s, log_path=str(log_path)) as pool, \
                state.log.open("a") as fh:  # fmt: skip
            if not run.loop(pool, fh, stop_after):
                return {"interrupted": True, "commits": run.commits}
    finally:
        run.bar.close()
        if own_timer and timer is not None:
            timer.close()
    return _export(cfg, out, state, quota, evals, run.stats, time.monotonic() - t_start)


def _progress_bar(cfg: SynthesisConfig, state: _State):
    from tqdm.auto import tqdm

    return tqdm(
        total=cfg.num_tasks,
        initial=min(cfg.num_tasks, sum(len(v) for v in state.kept.values())),
        desc="synthesize",
        unit="task",
        disable=not cfg.progress,
        dynamic_ncols=True,
    )


def _duplicate(task: str, rec: TaskRecord, state: _State) -> dict:
    """The drop of a task whose op graph a committed task already has."""
    return {"id": task, "reason": "duplicate", "detail": f"same op graph as {state.sigs[rec.signature]}"}


class _Run:
    """One run's speculative work: candidates generated ahead of the commit log, their check results, and
    the commit of those results in stream order (the module docstring says why commits wait for it)."""

    def __init__(
        self,
        cfg: SynthesisConfig,
        out: Path,
        state: _State,
        quota: dict[str, int],
        evals: EvalIndex | None,
        timer: Timer | None,
        bar,
    ):
        self.cfg, self.out, self.state, self.quota, self.evals, self.timer, self.bar = (
            cfg, out, state, quota, evals, timer, bar
        )  # fmt: skip
        self.workers = cfg.workers or os.cpu_count() or 1
        self.results: dict[tuple[str, int], dict] = {}  # decided, waiting for their turn to commit
        self.pending: dict[tuple[str, int], Candidate] = {}  # generated and passed the static filters
        self.gen_j = dict(state.next_j)
        self.commits = 0
        self.stats: Counter = Counter()

    def need(self, b: str) -> int:
        return self.quota[b] - len(self.state.kept[b])

    def unfinished(self) -> bool:
        return any(self.need(b) > 0 for b in BUCKETS)

    def loop(self, pool: WorkerPool, fh, stop_after: int | None) -> bool:
        """Fill, collect, commit until every quota is met; False if stopped after ``stop_after`` commits."""
        while self.unfinished():
            self.fill(pool)
            self.collect(pool)
            if not self.commit_ready(fh, stop_after):
                return False
            self.bar.set_postfix(dropped=sum(self.state.drops.values()), refresh=False)
        return True

    def fill(self, pool: WorkerPool) -> None:
        """Speculative candidates, at most ~1.5x what each bucket still needs in flight."""
        cap = 3 * self.workers
        for b in BUCKETS:
            while self.need(b) > 0 and pool.busy < cap and self._inflight(b) < self._max_inflight(b):
                j = self._next_index(b)
                drop = self._static_drop(b, j)
                if drop is None:
                    pool.submit((b, j), self.pending[(b, j)].payload)
                else:
                    self.results[(b, j)] = drop

    def _inflight(self, b: str) -> int:
        return sum(1 for (bb, _) in self.pending if bb == b)

    def _max_inflight(self, b: str) -> int:
        return max(1, math.ceil(self.need(b) * 1.5))

    def _next_index(self, b: str) -> int:
        j = self.gen_j[b]
        self.gen_j[b] += 1
        if j > MAX_CANDIDATES_PER_TASK * max(self.quota[b], 1) + 100:
            raise RuntimeError(
                f"bucket {b} is stuck: {j} candidates for {self.quota[b]} tasks; "
                "check the mix, exclude_ops and filters"
            )
        return j

    def _static_drop(self, b: str, j: int) -> dict | None:
        """A drop decided without running the task, or None (the candidate is then pending)."""
        tid = task_id(self.cfg.seed, b, j)
        try:
            cand = make_candidate(self.cfg, b, j)
        except Reject as exc:
            reason, detail = drop_reason(exc)
            return {"id": tid, "reason": reason, "detail": detail}
        rec = cand.record
        f = self.cfg.filters
        if f.dedup and rec.signature in self.state.sigs:
            return _duplicate(tid, rec, self.state)
        if self.evals is not None:
            name, score = self.evals.nearest(rec.source)
            rec.meta["nearest_eval"] = {"problem": name, "similarity": round(score, 4)}
            if score > f.decontam_threshold:
                return {
                    "id": tid,
                    "reason": "contaminated",
                    "detail": f"{score:.3f} similar to {name}",
                    "nearest_eval": name,
                    "similarity": round(score, 4),
                }
        self.pending[(b, j)] = cand
        return None

    def collect(self, pool: WorkerPool) -> None:
        """Execution results of pending candidates (survivors timed on the GPU)."""
        waiting = any(k not in self.results for k in self.pending)
        for key, res in pool.poll(0.2 if waiting else 0.0):
            cand = self.pending.get(key)
            if cand is not None:
                self._count(cand, res)
                self.results[key] = self._checked(cand, res)

    def _count(self, cand: Candidate, res: dict) -> None:
        for k, v in res.get("timings", {}).items():
            self.stats[f"seconds_{k}"] += v
        if cand.payload.get("also_inductor"):
            self.stats["inductor_checked"] += 1
            self.stats["inductor_failed"] += str(res.get("reason", "")).endswith("_inductor")

    def _checked(self, cand: Candidate, res: dict) -> dict:
        """The decision on a checked candidate: ``{"kept": record}`` or a drop."""
        rec = cand.record
        if not res.get("ok"):
            return {
                "id": rec.id,
                "reason": res.get("reason") or "check_failed",
                "detail": res.get("detail", ""),
            }
        if res.get("out_shape") is not None:
            rec.meta["checked_output_shape"] = res["out_shape"]
        if self.timer is not None:
            f = self.cfg.filters
            reason, detail = apply_window(rec, self.timer.time(rec), f.runtime_min_ms, f.runtime_max_ms)
            if reason:
                return {"id": rec.id, "reason": reason, "detail": detail}
        return {"kept": rec}

    def commit_ready(self, fh, stop_after: int | None) -> bool:
        """Commit every decided result whose turn has come; dedup against committed tasks only. False once
        ``stop_after`` commits are done."""
        for b in BUCKETS:
            while self.need(b) > 0 and (b, self.state.next_j[b]) in self.results:
                self._commit(b, fh)
                if stop_after is not None and self.commits >= stop_after:
                    fh.flush()
                    return False
            fh.flush()
        return True

    def _commit(self, b: str, fh) -> None:
        j = self.state.next_j[b]
        res = self.results.pop((b, j))
        self.pending.pop((b, j), None)
        entry: dict[str, Any] = {"bucket": b, "j": j}
        rec = res.get("kept")
        if rec is not None and self.cfg.filters.dedup and rec.signature in self.state.sigs:
            res, rec = _duplicate(rec.id, rec, self.state), None
        if rec is not None:
            _write_task(self.out, rec)
            entry.update(status="kept", id=rec.id, record=rec.to_dict())
            self.bar.update(1)
        else:
            entry.update(status="dropped", **res)
        self.state.commit(entry, fh)
        self.commits += 1


def _export(cfg, out: Path, state: _State, quota, evals, stats, seconds: float) -> dict:
    kept = [r for b in BUCKETS for r in state.kept[b][: quota[b]]]
    kept.sort(key=lambda r: r.id)
    names = {f"{r.name}.py" for r in kept}
    for stale in (out / "tasks").glob("*.py"):
        if stale.name not in names:  # only ever our own files: kept by a run with a larger num_tasks
            stale.unlink()
    for r in kept:
        if not (out / "tasks" / f"{r.name}.py").exists():
            _write_task(out, r)
    write_jsonl(out / "tasks.jsonl", kept)
    return write_manifest(cfg, out, kept, state, evals, stats, seconds)
