"""Soak test of the sandbox: many evaluations in random order, several in flight, every kind of candidate.

    python benchmarks/soak.py --count 500 --concurrency 4 --out soak.json            # CPU or GPU
    python benchmarks/soak.py --count 20 --concurrency 3 --device cpu --no-progress    # what the test runs
    python benchmarks/soak.py --count 60 --concurrency 4 --run-workers-per-gpu 2      # two run workers

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
the soak managed 71 verdicts with 45 restarts in 349 s (benchmarks/results/issue12_gpu.md): a restart every
7.8 s of wall time, the hangs' timeouts included.

Settings: ``--run-workers-per-gpu N`` (``SandboxConfig.run_workers_per_gpu``: N run workers, each with its
standby, per GPU; the soak times nothing unless ``--timing``, and then its workers time under the GPU lock,
``--no-exclusive-timing`` to time without) and ``--concurrency`` about compile
workers + run workers (GPUs x N) + a few, so no worker waits for a request; more only adds to each verdict's
queued time, not to the rate. On a 16-core H200 host, for 500 verdicts in about 8 minutes (an estimate from
the numbers above, not yet run; ``--budget-s`` writes the report of what was done in time either way):

    timeout 525 python benchmarks/soak.py --count 500 --concurrency 16 --run-workers-per-gpu 8 \\
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

    timeout 235 python benchmarks/soak.py --count 500 --budget-s 200 --no-progress --out soak.json
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import datetime
import json
import math
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernels_env.rules.messages import Source  # noqa: E402 - after the path set-up

REFERENCE = ROOT / "tests" / "redteam" / "problems" / "relu.py"
ATTACKS = ROOT / "tests" / "redteam" / "solutions" / "attacks"
FORGERIES = ("forge_reply_protocol_fd.py", "forge_compile_report.py", "forge_reply_stdout.py")

TRITON = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x - shift, 0.0), mask=mask)


@triton.jit
def spin_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    total = tl.sum(acc, axis=0) + 1.0
    # Never false: a kernel that does not end. The loop reads memory (volatile: every iteration) and its
    # result is stored: the first form (total += 1, result unused) was compiled away on the GPU, so the
    # "hang" returned at once and was judged correct (H200 soak, 2026-12-01).
    while total > 0.0:
        total = total + 1.0 + 0.0 * tl.load(x_ptr, volatile=True)
    tl.store(y_ptr + offs, acc + 0.0 * total, mask=offs < n)


@triton.jit
def far_store_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs + (1 << 40), x, mask=offs < n)  # far outside any allocation


def relu(x, shift=0.0):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), shift, BLOCK=256)
    return y

{header}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{body}
"""


@dataclass(frozen=True)
class Category:
    name: str
    expect: str  # alternatives joined by "|": a status, or "rejected:<check>"
    source: Callable[[int], str | Source]
    gpu_only: bool = False


def triton(body: str, header: str = "") -> Callable[[int], str]:
    def make(i: int) -> str:
        indented = "\n".join("        " + line for line in body.strip().splitlines())
        return f"# soak candidate {i}\n" + TRITON.format(header=header, body=indented)

    return make


def _header(file: str) -> dict[str, str]:
    """The red-team header's fields (``# redteam: class=... expect=... helpers=a.py,b.py``)."""
    header = (ATTACKS / file).read_text().splitlines()[0]
    return dict(part.split("=", 1) for part in header.split() if "=" in part)


def attack(file: str) -> Callable[[int], str | Source]:
    """A red-team attack as a candidate: its source, or a workspace with its helper modules (the corpus's
    ``helpers=``), made unique per candidate so no two share a build."""
    text = (ATTACKS / file).read_text()
    helpers = [h for h in _header(file).get("helpers", "").split(",") if h]
    if not helpers:
        return lambda i: f"# soak candidate {i}\n" + text
    files = {h: (ATTACKS.parent / h).read_text() for h in helpers}
    return lambda i: Source(
        name=f"{file[:-3]}_{i}", files={"model_new.py": f"# soak candidate {i}\n" + text, **files}
    )


def attack_expect(file: str) -> str:
    """The red-team header's ``expect=`` (a check name, or several with ``|``) as rejections."""
    return "|".join(f"rejected:{check}" for check in _header(file)["expect"].split("|"))


HOG = "hog = []\nwhile True:\n    hog.append(torch.ones(2**26))"
CATEGORIES = [
    Category("correct", "correct", triton("return relu(x)")),
    Category("wrong", "incorrect", triton("return relu(x, shift=0.25)")),
    Category("abort", "runtime_error", triton("import os\nos.abort()")),
    Category("segfault", "runtime_error", triton("import ctypes\nctypes.string_at(0)")),
    Category("hang_import", "timeout", triton("return relu(x)", header="while True:\n    pass")),
    Category("hang_forward", "timeout", triton("while True:\n    pass")),
    Category(
        "hang_kernel",
        "timeout",
        triton("y = torch.empty_like(x)\nspin_kernel[(1,)](x, y, x.numel(), BLOCK=1024)\nreturn y"),
    ),
    Category("memory", "runtime_error", triton(HOG)),
    Category(
        "illegal_address",
        "runtime_error|rejected:launch_error",
        triton("y = torch.empty_like(x)\nfar_store_kernel[(4,)](x, y, x.numel(), BLOCK=256)\nreturn y"),
        gpu_only=True,
    ),
    *(Category(f"forged:{f[:-3]}", attack_expect(f), attack(f)) for f in FORGERIES),
]
CACHES = ("torchinductor_",)  # torch's compile cache lives in TMPDIR by design: persistent, not a leak
NEEDLES = {"abort": "SIGABRT", "segfault": "SIGSEGV", "memory": "memory"}  # what the error must name


def earned(category: Category, result: dict) -> bool:
    """Whether ``result`` is the verdict this category's candidate earned."""
    for option in category.expect.split("|"):
        status, _, check = option.partition(":")
        if result.get("status") == status and (not check or result.get("check") == check):
            needle = NEEDLES.get(category.name)
            return needle is None or needle in (result.get("error") or "")
    return False


# leaks ------------------------------------------------------------------------------------------------------
def descendants() -> set[int]:
    import psutil

    with contextlib.suppress(psutil.Error):
        return {p.pid for p in psutil.Process().children(recursive=True)}
    return set()


@contextlib.contextmanager
def private_tmpdir():
    """A fresh ``TMPDIR`` for this process and everything it starts (the workers inherit the environment)."""
    root = tempfile.mkdtemp(prefix="kernels_env_soak_tmp-")
    saved = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = root
    tempfile.tempdir = None  # recomputed from TMPDIR
    try:
        yield Path(root)
    finally:
        if saved is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved
        tempfile.tempdir = None


def describe(pid: int) -> str:
    """What a leaked process was (its command line, parent and age), so a leak seen once can be traced."""
    import psutil

    try:
        p = psutil.Process(pid)
        with p.oneshot():
            cmd = " ".join(p.cmdline())[:200] or p.name()
            return f"{cmd} (parent {p.ppid()}, {time.time() - p.create_time():.0f} s old, {p.status()})"
    except psutil.Error as exc:
        return f"gone by the report ({type(exc).__name__})"


def settle_descendants(before: set[int], timeout_s: float = 15.0) -> set[int]:
    """Descendants started since ``before`` still alive after ``timeout_s`` (workers exit asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        extra = descendants() - before
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.25)


class StartCounter:
    """Counts worker restarts by role and times them: ``Worker.start`` runs once per worker slot (a standby
    is a slot of its own) and again on the same object for every restart."""

    def __init__(self) -> None:
        from kernels_env.runtime import supervisor

        self.starts: dict[int, list] = {}  # id(worker) -> [role, starts, [seconds of each restart]]
        self._lock = threading.Lock()
        original = supervisor.Worker.start
        self._restore = lambda: setattr(supervisor.Worker, "start", original)

        def start(worker, *args, **kwargs):
            with self._lock:
                entry = self.starts.setdefault(id(worker), [worker.role, 0, []])
                entry[1] += 1
                again = entry[1] > 1
            t0 = time.perf_counter()
            try:
                return original(worker, *args, **kwargs)
            finally:
                if again:  # a restart (process start to its hello): what a crash costs its worker slot
                    with self._lock:
                        entry[2].append(time.perf_counter() - t0)

        supervisor.Worker.start = start

    def restarts(self) -> dict[str, int]:
        out: collections.Counter = collections.Counter()
        for role, starts, _ in self.starts.values():
            out[role] += starts - 1
        return dict(out)

    def restart_seconds(self) -> dict[str, dict]:
        """Per role: how long a restart took (median, max) and in all (seconds of a worker slot)."""
        by_role: dict[str, list[float]] = collections.defaultdict(list)
        for role, _, seconds in self.starts.values():
            by_role[role] += seconds
        return {
            role: {
                "median_s": round(statistics.median(xs), 2),
                "max_s": round(max(xs), 2),
                "total_s": round(sum(xs), 1),
            }
            for role, xs in sorted(by_role.items())
            if xs
        }

    def close(self) -> None:
        self._restore()


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


def say(text: str) -> None:
    print(f"soak: {text}", file=sys.stderr, flush=True)


class Stop:
    """A signal's name once one asked the run to stop (set by ``main``'s handler; read by ``drive``)."""

    def __init__(self) -> None:
        self.signal: str | None = None

    def handler(self, signum, _frame) -> None:
        self.signal = signal.Signals(signum).name
        signal.signal(signum, signal.SIG_DFL)  # a second one kills at once


@dataclass
class Done:
    records: list[dict]
    submitted: int
    abandoned: list  # futures of requests still in flight when a signal stopped the run
    stopped_by: str | None  # None (all --count requests made), "budget", or the signal's name


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


PHASES = ("queued", "compile", "run")  # of a verdict's durations_s: waiting for a worker, the two stages


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
