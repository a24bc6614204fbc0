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
from .config import SynthesisConfig
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
        raise ValueError(f"mix needs 5 non-negative op-count weights and a module weight, got {weights}")
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
        raise ValueError(f"num_tasks must be >= 1, got {cfg.num_tasks}")
    f = cfg.filters
    if not 0 < f.runtime_min_ms < f.runtime_max_ms:
        raise ValueError(f"runtime window [{f.runtime_min_ms}, {f.runtime_max_ms}] ms is empty")
    if f.compile_backend not in ("none", "eager", "aot_eager", "inductor"):
        raise ValueError(f"unknown compile_backend {f.compile_backend!r}")
    unknown = set(cfg.mix.exclude_ops) - set(LIBRARY)
    if unknown:
        raise ValueError(f"exclude_ops names unknown ops {sorted(unknown)}")
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
            raise ValueError(
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
    use_gpu = f.gpu.enabled or timer is not None
    workers = cfg.workers or os.cpu_count() or 1
    results: dict[tuple[str, int], dict] = {}
    pending: dict[tuple[str, int], Candidate] = {}
    gen_j = dict(state.next_j)
    commits = 0
    stats: Counter = Counter()

    def need(b: str) -> int:
        return quota[b] - len(state.kept[b])

    def static(b: str, j: int) -> dict | None:
        """A drop decided without running the task, or None (submitted for checks)."""
        tid = task_id(cfg.seed, b, j)
        try:
            cand = make_candidate(cfg, b, j)
        except Reject as exc:
            reason, detail = drop_reason(exc)
            return {"id": tid, "reason": reason, "detail": detail}
        rec = cand.record
        if f.dedup and rec.signature in state.sigs:
            return {
                "id": tid,
                "reason": "duplicate",
                "detail": f"same op graph as {state.sigs[rec.signature]}",
            }
        if evals is not None:
            name, score = evals.nearest(rec.source)
            rec.meta["nearest_eval"] = {"problem": name, "similarity": round(score, 4)}
            if score > f.decontam_threshold:
                return {
                    "id": tid,
                    "reason": "contaminated",
                    "detail": f"{score:.3f} similar to {name}",
                    "nearest_eval": name,
                    "similarity": round(score, 4),
                }
        pending[(b, j)] = cand
        return None

    from tqdm.auto import tqdm

    bar = tqdm(
        total=cfg.num_tasks,
        initial=min(cfg.num_tasks, sum(len(v) for v in state.kept.values())),
        desc="synthesize",
        unit="task",
        disable=not cfg.progress,
        dynamic_ncols=True,
    )
    log_path = out / "workers.log"
    try:
        if not any(need(b) > 0 for b in BUCKETS):  # finished already: export only, no workers
            return _export(cfg, out, state, quota, evals, stats, time.monotonic() - t_start)
        target = "research.data.checks:check_task"
        with WorkerPool(target, workers, f.timeout_s, log_path=str(log_path)) as pool, \
                (out / "candidates.jsonl").open("a") as fh:  # fmt: skip
            while any(need(b) > 0 for b in BUCKETS):
                # 1. fill: speculative candidates, at most ~1.5x what each bucket still needs in flight
                cap = 3 * workers
                for b in BUCKETS:
                    while need(b) > 0 and pool.busy < cap:
                        inflight = sum(1 for (bb, _) in pending if bb == b)
                        if inflight >= max(1, math.ceil(need(b) * 1.5)):
                            break
                        j = gen_j[b]
                        gen_j[b] += 1
                        if j > MAX_CANDIDATES_PER_TASK * max(quota[b], 1) + 100:
                            raise RuntimeError(
                                f"bucket {b} is stuck: {j} candidates for {quota[b]} tasks; "
                                "check the mix, exclude_ops and filters"
                            )
                        drop = static(b, j)
                        if drop is None:
                            pool.submit((b, j), pending[(b, j)].payload)
                        else:
                            results[(b, j)] = drop
                # 2. collect execution results (and time survivors on the GPU)
                for key, res in pool.poll(0.2 if any(k not in results for k in pending) else 0.0):
                    cand = pending.get(key)
                    if cand is None:
                        continue
                    for k, v in res.get("timings", {}).items():
                        stats[f"seconds_{k}"] += v
                    if cand.payload.get("also_inductor"):
                        stats["inductor_checked"] += 1
                        stats["inductor_failed"] += str(res.get("reason", "")).endswith("_inductor")
                    if res.get("ok"):
                        rec = cand.record
                        if res.get("out_shape") is not None:
                            rec.meta["checked_output_shape"] = res["out_shape"]
                        if use_gpu:
                            reason, detail = apply_window(
                                rec, timer.time(rec), f.runtime_min_ms, f.runtime_max_ms
                            )
                            if reason:
                                results[key] = {"id": rec.id, "reason": reason, "detail": detail}
                                continue
                        results[key] = {"kept": rec}
                    else:
                        results[key] = {
                            "id": cand.record.id,
                            "reason": res.get("reason") or "check_failed",
                            "detail": res.get("detail", ""),
                        }
                # 3. commit strictly in stream order; dedup against committed tasks only
                for b in BUCKETS:
                    while need(b) > 0 and (b, state.next_j[b]) in results:
                        j = state.next_j[b]
                        res = results.pop((b, j))
                        pending.pop((b, j), None)
                        entry: dict[str, Any] = {"bucket": b, "j": j}
                        rec = res.get("kept")
                        if rec is not None and f.dedup and rec.signature in state.sigs:
                            res = {
                                "id": rec.id,
                                "reason": "duplicate",
                                "detail": f"same op graph as {state.sigs[rec.signature]}",
                            }
                            rec = None
                        if rec is not None:
                            _write_task(out, rec)
                            entry.update(status="kept", id=rec.id, record=rec.to_dict())
                            bar.update(1)
                        else:
                            entry.update(status="dropped", **res)
                        state.commit(entry, fh)
                        commits += 1
                        if stop_after is not None and commits >= stop_after:
                            fh.flush()
                            return {"interrupted": True, "commits": commits}
                    fh.flush()
                bar.set_postfix(dropped=sum(state.drops.values()), refresh=False)
    finally:
        bar.close()
        if own_timer and timer is not None:
            timer.close()
    return _export(cfg, out, state, quota, evals, stats, time.monotonic() - t_start)


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
