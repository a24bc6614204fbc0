"""The soak's report: verdicts and time per verdict per category, where the time went, and the progress
lines a run prints on the way."""

from __future__ import annotations

import collections
import datetime
import math
import statistics
import sys
import time
from dataclasses import dataclass

from .soak_leaks import describe

PHASES = ("queued", "compile", "run")  # of a verdict's durations_s: waiting for a worker, the two stages


def say(text: str) -> None:
    print(f"soak: {text}", file=sys.stderr, flush=True)


@dataclass
class Done:
    records: list[dict]
    submitted: int
    abandoned: list  # futures of requests still in flight when a signal stopped the run
    stopped_by: str | None  # None (all --count requests made), "budget", or the signal's name


class Progress:
    """How far the run is: a tqdm bar, or (``quiet``: ``--no-progress``) a line on stderr every ``EVERY``
    verdicts or ``EVERY_S`` seconds, so that a run cut short has still said how far it got."""

    EVERY, EVERY_S = 25, 20.0

    def __init__(self, total: int, quiet: bool, started: float, records: list, inflight) -> None:
        self.total, self.started, self.records, self.inflight = total, started, records, inflight
        self.last = time.monotonic()
        self.bar = None
        if not quiet:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="soak", unit="verdict")

    def verdict(self) -> None:
        if self.bar is not None:
            self.bar.update(1)
        elif len(self.records) % self.EVERY == 0:
            self.line()

    def tick(self) -> None:
        if self.bar is None and time.monotonic() - self.last >= self.EVERY_S:
            self.line()

    def line(self) -> None:
        self.last = time.monotonic()
        say(progress_line(self.records, self.total, len(self.inflight), self.last - self.started))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def progress_line(records: list[dict], total: int, inflight: int, elapsed_s: float) -> str:
    """``50/500 done, 4 in flight, 123 s, 0 violations | abort 4, correct 5 (1 unearned), ...``"""
    counts = collections.Counter(r["category"] for r in records)
    bad = collections.Counter(r["category"] for r in records if not r["earned"])
    per = ", ".join(
        f"{c} {n}" + (f" ({bad[c]} unearned)" if bad[c] else "") for c, n in sorted(counts.items())
    )
    return (
        f"{len(records)}/{total} done, {inflight} in flight, {elapsed_s:.0f} s, "
        f"{sum(bad.values())} violations | {per or '-'}"
    )


def report(
    records, wall, restarts, leaked_procs, leaked_tmp, device, env, args, done: Done | None = None
) -> dict:
    """The report; ``done`` (a run stopped early): a record is owed for each request made, not abandoned."""
    import torch

    expected = args.count if done is None else done.submitted - len(done.abandoned)

    by_category: dict[str, dict] = {}
    for name in sorted({r["category"] for r in records}):
        rows = [r for r in records if r["category"] == name]
        times = sorted(r["total_s"] for r in rows if r.get("total_s") is not None)
        by_category[name] = {
            "count": len(rows),
            "earned": sum(r["earned"] for r in rows),
            "verdicts": dict(collections.Counter(f"{r['status']}:{r.get('check')}" for r in rows)),
            "median_s": round(statistics.median(times), 3) if times else None,
            "p95_s": round(times[math.ceil(0.95 * len(times)) - 1], 3) if times else None,  # nearest rank
            "max_s": round(times[-1], 3) if times else None,
            # where a verdict's time went: waiting for a worker, compile stage, run stage (medians)
            **{f"median_{phase}_s": _median(rows, f"{phase}_s") for phase in PHASES},
        }
    violations = [
        f"{r['category']}: {r['outcome']} {r.get('status')}:{r.get('check')} {r.get('error', '')[:160]}"
        for r in records
        if not r["earned"]
    ]
    if len(records) != expected:
        violations.append(f"{expected - len(records)} requests without a record")
    violations += [f"process {pid} outlived the client: {describe(pid)}" for pid in sorted(leaked_procs)]
    violations += [f"$TMPDIR/{name} left behind" for name in sorted(leaked_tmp)]
    return {
        "benchmark": "soak",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": device,
        "gpu": env.get("gpu"),
        "versions": {k: env.get(k) for k in ("driver", "cuda_runtime", "torch", "triton", "python")},
        "torch": torch.__version__,
        "count": args.count,
        "concurrency": args.concurrency,
        "run_workers_per_gpu": args.run_workers_per_gpu,
        "compile_workers": args.compile_workers,
        "timeouts_s": {"compile": args.compile_timeout, "run": args.run_timeout},
        "seed": args.seed,
        "wall_s": round(wall, 2),
        "verdicts_per_hour": round(len(records) / wall * 3600, 1) if wall else None,
        "restarts": restarts,
        "time_split": time_split(records),
        "categories": by_category,
        "violations": violations,
        "ok": not violations,
        "truncated": bool(done and done.stopped_by) and len(records) < args.count,
        "done": len(records),
        "submitted": expected if done is None else done.submitted,
        "abandoned": len(done.abandoned) if done else 0,
        "stopped_by": done.stopped_by if done else None,
        "budget_s": getattr(args, "budget_s", None),
    }


def _median(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def time_split(records: list[dict]) -> dict[str, float]:
    """Seconds summed over the verdicts: waiting for a worker, in the compile stage, in the run stage, and
    how much of the two stages went to requests that ended in a timeout (a hang holds its worker so long)."""
    out = {f"{phase}_s": round(sum(r.get(f"{phase}_s") or 0.0 for r in records), 1) for phase in PHASES}
    hung = [r for r in records if r.get("status") == "timeout"]
    out["in_timeouts_s"] = round(sum((r.get("compile_s") or 0.0) + (r.get("run_s") or 0.0) for r in hung), 1)
    waits = [r["gpu_wait_s"] for r in records if r.get("gpu_wait_s") is not None]
    if waits:  # under the GPU lock: how much of the run stage went to waiting for a neighbour's timing
        out["gpu_wait_s"] = round(sum(waits), 1)
    return out
