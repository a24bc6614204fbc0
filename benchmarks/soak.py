"""Soak test of the sandbox: many evaluations in random order, several in flight, every kind of candidate.

    python benchmarks/soak.py --count 500 --concurrency 4 --out soak.json            # CPU or GPU
    python benchmarks/soak.py --count 20 --concurrency 3 --device cpu --no-progress    # what the test runs

Candidates (one reference, tests/redteam/problems/relu.py): correct and wrong Triton kernels, crashes
(abort, segfault), hangs (import, forward, kernel), memory blow-ups, forged replies (the red-team corpus's
reply-channel attacks, tests/redteam/solutions/attacks) and, on a GPU, illegal addresses. Each has a unique
comment, so no two sources are the same. Invariants (``violations`` lists every breach; exit 1 when any):

- every request gets the verdict its candidate earned (the expectation is per category);
- none is lost or hangs: each future resolves within its bound;
- no worker or temporary file leaks: this process's descendants are the same before the client starts and
  after it closed, and the private ``TMPDIR`` the sandbox (workers, compile children, candidates) ran with
  is empty again (other users of ``/tmp`` cannot blur the count).

Reported: verdicts and time per verdict (median / p95 / max of ``durations_s.total``) per category, worker
starts beyond the initial ones (restarts, per role), wall time, GPU and versions.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import json
import math
import os
import random
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
    while total > 0.0:  # never false: a kernel that does not end
        total = total + 1.0
    tl.store(y_ptr + offs, acc, mask=offs < n)


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


def settle_descendants(before: set[int], timeout_s: float = 15.0) -> set[int]:
    """Descendants started since ``before`` still alive after ``timeout_s`` (workers exit asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        extra = descendants() - before
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.25)


class StartCounter:
    """Counts worker restarts by role: ``Worker.start`` runs once per worker slot (a standby is a slot of its
    own) and again on the same object for every restart."""

    def __init__(self) -> None:
        from kernels_env.runtime import supervisor

        self.starts: dict[int, list] = {}  # id(worker) -> [role, starts]
        self._lock = threading.Lock()
        original = supervisor.Worker.start
        self._restore = lambda: setattr(supervisor.Worker, "start", original)

        def start(worker, *args, **kwargs):
            with self._lock:
                self.starts.setdefault(id(worker), [worker.role, 0])[1] += 1
            return original(worker, *args, **kwargs)

        supervisor.Worker.start = start

    def restarts(self) -> dict[str, int]:
        out: collections.Counter = collections.Counter()
        for role, starts in self.starts.values():
            out[role] += starts - 1
        return dict(out)

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
    )


def run(args) -> dict:
    import shutil

    from kernels_env.client import SandboxClient
    from kernels_env.rules.config import JudgeConfig

    judge = JudgeConfig(time_candidate=args.timing, num_trials=2, families=[])
    cache_dir = tempfile.mkdtemp(prefix="kernels_env_soak_cache-")  # cold: every build and baseline is real
    before_procs = descendants()
    counter = StartCounter()
    started = time.perf_counter()
    try:
        with private_tmpdir() as tmp, SandboxClient(config(args, cache_dir)) as sb:
            sb.start()
            order = plan(args.count, sb.device, args.seed)
            records = drive(sb, order, judge, args)
            device, env = sb.device, sb.environment
    finally:
        counter.close()
    wall = time.perf_counter() - started
    leaked_procs = settle_descendants(before_procs)
    leaked_tmp = {p.name for p in tmp.iterdir() if not p.name.startswith(CACHES)}
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(cache_dir, ignore_errors=True)
    return report(records, wall, counter.restarts(), leaked_procs, leaked_tmp, device, env, args)


def drive(sb, order: list[Category], judge, args) -> list[dict]:
    """Keep ``args.concurrency`` requests in flight; each future must resolve within its bound."""
    bound = (args.compile_timeout + args.run_timeout + 60) * args.concurrency + 120
    records: list[dict] = []
    inflight: collections.deque = collections.deque()
    progress = _progress(len(order), args.no_progress)
    for i, category in enumerate(order):
        inflight.append((category, time.monotonic(), sb.submit(REFERENCE, category.source(i), judge)))
        if len(inflight) >= args.concurrency:
            records.append(_collect(*inflight.popleft(), bound))
            progress(records[-1])
    while inflight:
        records.append(_collect(*inflight.popleft(), bound))
        progress(records[-1])
    return records


def _collect(category: Category, submitted: float, future, bound: float) -> dict:
    remaining = max(1.0, bound - (time.monotonic() - submitted))
    try:
        result = future.result(timeout=remaining)
    except TimeoutError:
        return {"category": category.name, "outcome": "hung", "status": None, "earned": False}
    except Exception as exc:  # the client itself failed: a lost request
        error = f"{type(exc).__name__}: {exc}"[:300]
        return {"category": category.name, "outcome": "lost", "status": None, "earned": False, "error": error}
    return {
        "category": category.name,
        "outcome": "verdict",
        "status": result.get("status"),
        "check": result.get("check"),
        "earned": earned(category, result),
        "error": (result.get("error") or "")[:300],
        "total_s": (result.get("durations_s") or {}).get("total"),
    }


def _progress(total: int, quiet: bool) -> Callable[[dict], None]:
    if quiet:
        return lambda record: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc="soak", unit="verdict")
    return lambda record: bar.update(1)


def report(records, wall, restarts, leaked_procs, leaked_tmp, device, env, args) -> dict:
    import torch

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
        }
    violations = [
        f"{r['category']}: {r['outcome']} {r.get('status')}:{r.get('check')} {r.get('error', '')[:160]}"
        for r in records
        if not r["earned"]
    ]
    if len(records) != args.count:
        violations.append(f"{args.count - len(records)} requests without a record")
    violations += [f"process {pid} outlived the client" for pid in sorted(leaked_procs)]
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
        "seed": args.seed,
        "wall_s": round(wall, 2),
        "verdicts_per_hour": round(len(records) / wall * 3600, 1) if wall else None,
        "restarts": restarts,
        "categories": by_category,
        "violations": violations,
        "ok": not violations,
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile-workers", type=int, default=2)
    p.add_argument("--compile-timeout", type=float, default=10.0, help="also the import-hang cut-off")
    p.add_argument("--run-timeout", type=float, default=10.0, help="also the forward/kernel-hang cut-off")
    p.add_argument("--memory-limit-gb", type=float, default=2.0)
    p.add_argument("--timing", action="store_true", help="also time correct candidates (slower)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--out", type=Path)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    result = run(args)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
