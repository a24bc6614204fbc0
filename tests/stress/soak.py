"""Soak test of the sandbox: many evaluations in random order, several in flight, every kind of candidate.

    python -m tests.stress.soak --count 500 --concurrency 4 --out soak.json            # CPU or GPU
    python -m tests.stress.soak --count 20 --concurrency 3 --device cpu --no-progress    # what the test runs
    python -m tests.stress.soak --count 60 --concurrency 4 --run-workers-per-gpu 2      # two run workers

Candidates (one reference, tests/redteam/problems/relu.py): correct and wrong Triton kernels, crashes
(abort, segfault), hangs (import, forward, kernel), memory blow-ups, forged replies (the red-team corpus's
reply-channel attacks, tests/redteam/solutions/attacks) and, on a GPU, illegal addresses. Each has a unique
comment, so no two sources are the same. Invariants (``violations`` lists every breach; exit 1 when any):

- every request gets the verdict its candidate earned (the expectation is per category);
- none is lost or hangs: each future resolves within its bound;
- no worker or temporary file leaks: this process's descendants are the same before the client starts and
  after it closed, and the private ``TMPDIR`` the sandbox (workers, compile children, candidates) ran with
  is empty again (other users of ``/tmp`` cannot blur the count).

Reported: verdicts and time per verdict (median / p95 / max of ``durations_s.total``, and the median of its
queued / compile / run parts) per category, worker starts beyond the initial ones (restarts per role, and
their seconds: ``restart_s``), ``time_split`` (seconds summed over the verdicts: queued, compile, run, and the
part of the stages spent in requests that ended in a timeout), start-up and wall time, the sandbox's set-up
(compile workers, run workers per GPU, timeouts), GPU and versions.

Where a verdict's time goes. Every crash, hang and memory blow-up in the mix ends its run worker (7 of the
12 GPU categories; hangs also hold it for ``--run-timeout``), and with the sandbox's default of one run worker
per GPU every other request waits for that worker. CPU mode, 2 cores shared with other jobs (load 4-6),
``--count 60 --concurrency 4``, 10 s timeouts, seed 0, 0 violations either way:

- one run worker: 60 verdicts in 196 s (1,104/hour), 32 run-worker restarts (median 6.1 s each). Summed over
  the verdicts: 564 s queued, 116 s in the run stage (100 s of it the 10 forward/kernel hangs' timeouts),
  65 s compiling (60 s the 6 import hangs). Queueing dominates: the one worker spends half the wall time in
  hang timeouts, and after a crash its standby is often not back yet (a crash every ~6 s, a restart as long);
- ``--run-workers-per-gpu 2``: 146 s (1,484/hour), 315 s queued; the restarts (median 9.0 s: four run
  processes restarting on two busy cores) are now the limit.

A run worker's restart is ~2.7 s on an idle core: ``import torch`` 1.1 s, ``torch._dynamo``'s module tagging
1.0 s (installed before the judge's integrity baseline, or a later ``torch.compile`` would look like a
candidate replacing judge code), Triton and judge imports, environment and a collection 0.6 s. None of it can
be deferred without weakening a check, so it stays; the lever is more workers. On the H200 with one worker
the soak managed 71 verdicts with 45 restarts in 349 s (docs/results/issue12_gpu.md): a restart every
7.8 s of wall time, the hangs' timeouts included.

Settings: ``--run-workers-per-gpu N`` (``SandboxConfig.run_workers_per_gpu``: N run workers, each with its
standby, per GPU; the soak times nothing unless ``--timing``, and then its workers time under the GPU lock,
``--no-exclusive-timing`` to time without) and ``--concurrency`` about compile
workers + run workers (GPUs x N) + a few, so no worker waits for a request; more only adds to each verdict's
queued time, not to the rate. On a 16-core H200 host, for 500 verdicts in about 8 minutes (an estimate from
the numbers above, not yet run; ``--budget-s`` writes the report of what was done in time either way):

    timeout 525 python -m tests.stress.soak --count 500 --concurrency 16 --run-workers-per-gpu 8 \\
        --compile-workers 4 --device cuda --budget-s 480 --no-progress --out soak.json

A run cut short still says how far it got:

- with ``--no-progress`` a line on stderr every 25 verdicts or 20 s (done/total, in flight, elapsed,
  violations so far, verdicts per category), and one when the sandbox is up;
- ``--budget-s S`` (seconds from the start, sandbox start-up included): no new request once the time left
  is what the requests in flight are expected to take plus a closing margin; those in flight are still
  collected within their bounds, the client closes, leaks are checked, and the report (every field) covers
  what was done, with ``"truncated": true``, ``done`` and ``stopped_by: "budget"``. At least one request
  is always made;
- SIGTERM (or SIGINT): stop at once, abandon the requests in flight (``abandoned``; not violations), close
  the client, check leaks, write the report (``stopped_by: "SIGTERM"``) and exit 143 (130 for SIGINT).
  A second signal kills at once.

    timeout 235 python -m tests.stress.soak --count 500 --budget-s 200 --no-progress --out soak.json
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .soak_cases import (  # noqa: F401
    ATTACKS,
    CACHES,
    CATEGORIES,
    FORGERIES,
    NEEDLES,
    REFERENCE,
    Category,
    earned,
)
from .soak_leaks import StartCounter, descendants, private_tmpdir, settle_descendants
from .soak_report import PHASES, Done, Progress, _median, progress_line, report, say, time_split  # noqa: F401


# the run ----------------------------------------------------------------------------------------------------
def plan(count: int, device: str, seed: int) -> list[Category]:
    usable = [c for c in CATEGORIES if device == "cuda" or not c.gpu_only]
    order = [usable[i % len(usable)] for i in range(count)]
    random.Random(seed).shuffle(order)
    return order


def config(args, cache_dir: str):
    from kernels_env.rules.config import SandboxConfig

    return SandboxConfig(
        device=args.device,
        cache_dir=cache_dir,
        num_compile_workers=args.compile_workers,
        compile_timeout_s=args.compile_timeout,
        run_timeout_s=args.run_timeout,
        memory_limit_gb=args.memory_limit_gb,
        startup_timeout_s=240,
        run_workers_per_gpu=args.run_workers_per_gpu,
        exclusive_timing=not args.no_exclusive_timing,
    )


def run(args, stop: Stop | None = None, started: float | None = None) -> dict:
    """The soak run and its report. ``stop``: set from a signal handler to end the run early (``main``);
    ``started``: the clock (``time.monotonic``) the budget counts from (default: now)."""
    import shutil

    from kernels_env.client import SandboxClient
    from kernels_env.rules.config import JudgeConfig

    stop = stop or Stop()
    started = time.monotonic() if started is None else started
    judge = JudgeConfig(time_candidate=args.timing, num_trials=2, families=[])
    cache_dir = tempfile.mkdtemp(prefix="kernels_env_soak_cache-")  # cold: every build and baseline is real
    before_procs = descendants()
    counter = StartCounter()
    wall_started = time.perf_counter()
    try:
        with private_tmpdir() as tmp, SandboxClient(config(args, cache_dir)) as sb:
            say(
                f"starting the sandbox (device {args.device}, {args.compile_workers} compile workers, "
                f"{args.run_workers_per_gpu} run worker(s) per GPU)"
            )
            sb.start()
            up_s = time.monotonic() - started
            say(f"sandbox up after {up_s:.1f} s on {sb.device}")
            order = plan(args.count, sb.device, args.seed)
            done = drive(sb, order, judge, args, started=started, stop=stop)
            device, env = sb.device, sb.environment
            timing_lock = sb._fleet.timing_lock
        # the requests abandoned at a signal end once the client has killed their workers
        concurrent.futures.wait(done.abandoned, timeout=15)
    finally:
        counter.close()
    wall = time.perf_counter() - wall_started
    leaked_procs = settle_descendants(before_procs)
    leaked_tmp = {p.name for p in tmp.iterdir() if not p.name.startswith(CACHES)}
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(cache_dir, ignore_errors=True)
    result = report(done.records, wall, counter.restarts(), leaked_procs, leaked_tmp, device, env, args, done)
    result["startup_s"] = round(up_s, 2)
    result["timing_lock"] = timing_lock  # run workers sharing a GPU timed under its lock
    result["restart_s"] = counter.restart_seconds()
    say(
        f"{'stopped (' + done.stopped_by + ')' if done.stopped_by else 'finished'}: {len(done.records)}/"
        f"{args.count} done, {len(result['violations'])} violation(s), {time.monotonic() - started:.0f} s"
    )
    return result


class Stop:
    """A signal's name once one asked the run to stop (set by ``main``'s handler; read by ``drive``)."""

    def __init__(self) -> None:
        self.signal: str | None = None

    def handler(self, signum, _frame) -> None:
        self.signal = signal.Signals(signum).name
        signal.signal(signum, signal.SIG_DFL)  # a second one kills at once


CLOSE_MARGIN_S = 20.0  # of --budget-s kept for closing the client, settling its processes and the report


def drive(
    sb, order: list[Category], judge, args, started: float | None = None, stop: Stop | None = None
) -> Done:
    """Keep ``args.concurrency`` requests in flight; each future must resolve within its bound. Stops
    submitting when ``args.budget_s`` is nearly used (then collects those in flight) or ``stop`` has a
    signal (then abandons them)."""
    stop = stop or Stop()
    started = time.monotonic() if started is None else started
    bound = (args.compile_timeout + args.run_timeout + 60) * args.concurrency + 120
    records: list[dict] = []
    inflight: collections.deque = collections.deque()
    progress = Progress(len(order), args.no_progress, started, records, inflight)
    first_submit = None
    stopped_by = None

    def over_budget() -> bool:
        """Whether one more request would not finish, with those in flight, before the budget's end."""
        if args.budget_s is None or first_submit is None:  # at least one request
            return False
        now = time.monotonic()
        # the pace so far (seconds per verdict; before the first, a request's timeouts), times the requests
        # that would be in flight
        pace = (now - first_submit) / len(records) if records else args.compile_timeout + args.run_timeout
        drain = pace * (len(inflight) + 1)
        return now - started + drain + CLOSE_MARGIN_S >= args.budget_s

    def waiting() -> bool:  # between slices of a wait: False abandons it
        progress.tick()
        return stop.signal is None

    def collect() -> bool:
        """Record the first request to finish (or pass its bound), not the oldest: a hang at the head of the
        queue would otherwise keep the requests finished behind it from being replaced, and the run would
        have fewer than ``--concurrency`` in flight for as long as the hang lasts."""
        index = _first_finished(inflight, bound, wait=waiting)
        if index is None:  # a signal: leave the rest in flight
            return False
        record = _collect(*inflight[index], bound)
        del inflight[index]
        records.append(record)
        progress.verdict()
        return True

    for i, category in enumerate(order):
        if stop.signal:
            break
        if over_budget():
            stopped_by = "budget"
            say(f"budget of {args.budget_s:g} s nearly used: no new request; {len(inflight)} in flight")
            break
        inflight.append((category, time.monotonic(), sb.submit(REFERENCE, category.source(i), judge)))
        first_submit = first_submit or inflight[-1][1]
        if len(inflight) >= args.concurrency and not collect():
            break
    while inflight and not stop.signal:
        if not collect():
            break
    if stop.signal:
        stopped_by = stop.signal
        say(f"{stop.signal}: abandoning {len(inflight)} request(s) in flight")
    progress.close()
    submitted = len(records) + len(inflight)
    return Done(records, submitted, [f for _, _, f in inflight] if stop.signal else [], stopped_by)


def _first_finished(inflight, bound: float, wait: Callable[[], bool] | None = None) -> int | None:
    """The index in ``inflight`` ((category, submitted, future) entries) of the first request that is done
    or past its bound (``bound`` seconds after it was submitted), waiting in slices of at most 1 s:
    ``wait()`` runs between them, and its False abandons the wait (None)."""
    while True:
        now = time.monotonic()
        for i, (_, submitted, future) in enumerate(inflight):
            if future.done() or now >= submitted + bound:
                return i
        nearest = min(submitted + bound for _, submitted, _ in inflight)
        futures = [future for _, _, future in inflight]
        timeout = min(max(nearest - now, 0.0), 1.0)
        done, _ = concurrent.futures.wait(
            futures, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        if not done and wait is not None and not wait():
            return None


def _collect(
    category: Category, submitted: float, future, bound: float, wait: Callable[[], bool] | None = None
):
    """The record of one request, waiting for it at most until ``bound`` seconds after it was submitted (at
    least 1 s from now), in slices: ``wait()`` runs between them, and its False abandons the wait (None)."""
    deadline = max(submitted + bound, time.monotonic() + 1.0)
    while not future.done():
        left = deadline - time.monotonic()
        if left <= 0:
            return {"category": category.name, "outcome": "hung", "status": None, "earned": False}
        concurrent.futures.wait([future], timeout=min(left, 1.0))
        if not future.done() and wait is not None and not wait():
            return None
    try:
        result = future.result(timeout=0)
    except Exception as exc:  # the client itself failed: a lost request
        error = f"{type(exc).__name__}: {exc}"[:300]
        return {"category": category.name, "outcome": "lost", "status": None, "earned": False, "error": error}
    durations = result.get("durations_s") or {}
    return {
        "category": category.name,
        "outcome": "verdict",
        "status": result.get("status"),
        "check": result.get("check"),
        "earned": earned(category, result),
        "error": (result.get("error") or "")[:300],
        "total_s": durations.get("total"),
        **{f"{phase}_s": durations.get(phase) for phase in PHASES},
        "gpu_wait_s": durations.get("gpu_wait"),  # of the run stage, waiting for the GPU lock (shared GPUs)
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=500)
    p.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="requests in flight: about compile workers + run workers + a few (see the module doc)",
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile-workers", type=int, default=2)
    p.add_argument(
        "--run-workers-per-gpu",
        type=int,
        default=1,
        help="run workers sharing each GPU (CPU mode: the CPU), each with a standby; with --timing they time "
        "under a GPU lock unless --no-exclusive-timing (SandboxConfig.run_workers_per_gpu)",
    )
    p.add_argument("--compile-timeout", type=float, default=10.0, help="also the import-hang cut-off")
    p.add_argument("--run-timeout", type=float, default=10.0, help="also the forward/kernel-hang cut-off")
    p.add_argument("--memory-limit-gb", type=float, default=2.0)
    p.add_argument("--timing", action="store_true", help="also time correct candidates (slower)")
    p.add_argument(
        "--no-exclusive-timing",
        action="store_true",
        help="with --run-workers-per-gpu > 1: no GPU lock, timings disturbed (SandboxConfig.exclusive_timing)"
        "; for runs that time nothing",
    )
    p.add_argument("--no-progress", action="store_true", help="no bar: a line every 25 verdicts / 20 s")
    p.add_argument(
        "--budget-s",
        type=float,
        help="seconds for the whole run (start-up included): stop submitting in time, report what was done",
    )
    p.add_argument("--out", type=Path)
    return p.parse_args(argv)


EXIT_ON_SIGNAL = {"SIGTERM": 143, "SIGINT": 130}


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    args = parse(argv)
    stop = Stop()
    saved = {sig: signal.signal(sig, stop.handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        result = run(args, stop, started)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text, flush=True)
    if stop.signal:
        return EXIT_ON_SIGNAL.get(stop.signal, 1)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
