"""The judge's memory plan: what one request may keep alive at once, decided from the reference's footprint
and the free device memory (issue 12: the judge, not the candidates, ran out of memory on today's KernelBench
sizes).

The footprint is measured once per request on the device (``measure``: one reference call on fresh inputs,
its inputs ``I``, outputs ``O``, the peak of its own temporaries ``W`` and the model's parameters ``P``). The
judge's costs per phase, in those units (what ``harness``/``families``/``timed_checks`` hold at their peak,
counted from the code; the comparisons and guard checks run in chunks and add no multiple of ``O``):

    trial      4I + 5O + W   inputs, the candidate's clone, the guard's copy, a determinism clone;
                             the reference's answer, three candidate answers (first trial) and the
                             guard's snapshot of the newest one (stream-race check)
    family     4I + 4O + W   inputs, their generation, a clone for each model, the guard's copy;
                             two reference answers (the family must be defined), the candidate's and
                             the guard's snapshot of it
    shape      family costs scaled by the grown batch (``SHAPE_GROWTH``)
    timing     (k + 3)I + 2O + W   k rotating input sets, fresh re-check inputs, their pristine clone,
                             the reference's and the candidate's answers

On top of every phase the candidate gets ``HEADROOM`` x (I + O + W) for its own allocations. The plan picks
the number of timing input sets (at most ``INPUT_BYTES_BUDGET`` of them at once, and what fits), runs each
family only where it fits (else ``skipped`` with the reason) and says whether the shape family may grow the
batch. ``plan`` is a pure function (footprint and free bytes in, plan out); the judge records it in the
verdict (``judge.memory_plan``). The free bytes are the device's, at most this worker's share of it when
``SandboxConfig.run_workers_per_gpu`` workers share the device (``device_share``; ``cap_to_share`` holds the
worker's allocator to it on a GPU), at most the configured budget.

Host memory: the supervisor kills a run worker whose RSS passes ``SandboxConfig.memory_limit_gb`` plus the
plan's ``host_bytes``, what the judge and the reference hold on the host at their peak. On a CPU that is all
of the above: the tightest phase the plan runs, the comparisons' chunked temporaries, the reference's
parameters, and one footprint (two in the retry) for what the estimate leaves out (the task's temporaries
while it builds inputs; the reference's workspace, which a CPU cannot measure). On a GPU it is one set of
inputs (a task whose ``get_inputs`` needs host tensors builds them there before they move); nothing else the
judge holds on the host grows with the task. ``Sections`` tells the supervisor that allowance and whose code
runs: a breach while the candidate's code runs is its ``runtime_error``; one in the judge's (or the
reference's) code is the judge's, retried once by the client with the smaller plan, then ``judge_error``.

Out of memory: an OOM raised inside the candidate's own code while the plan left it its full headroom is the
candidate's ``runtime_error``; an OOM in judge code (inputs, the reference, the guard, comparisons) or with
less headroom than promised is the judge's: the request is retried once with the smaller plan
(``retry=True``: one timing set, no growth, families only with twice the margin), and a second OOM is
``judge_error`` with the reason, never the candidate's failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .inputs import nbytes

GiB = 2**30
HEADROOM = 2.0  # the candidate may allocate this many times the reference's footprint on top of the judge
SHAPE_GROWTH = 1.5  # the shape family's grown batch (x the task's): an unwritten tail shows as poison
RETRY_MARGIN = 2.0  # the retry plan's families need twice their estimated cost to run
INPUT_BYTES_BUDGET = {"cuda": 8 * GiB, "cpu": GiB}  # bytes of rotated timing inputs kept at once, at most
RESERVE = {"cuda": GiB // 2, "cpu": 0}  # kept free for the CUDA context, kernels' launches, cuBLAS workspaces


@dataclass(frozen=True)
class Footprint:
    """The reference's memory on the device, in bytes: inputs, outputs, its own temporaries (peak beyond
    inputs and outputs; 0 where the device has no allocator statistics) and parameters + buffers."""

    inputs: int
    outputs: int
    workspace: int = 0
    params: int = 0

    @property
    def total(self) -> int:
        return self.inputs + self.outputs + self.workspace


@dataclass
class MemoryPlan:
    footprint: Footprint
    free_bytes: int  # what the judge plans with (device free memory, this worker's share, or the budget)
    free_source: str  # "device" | "share" | "budget"
    timing_sets: int
    shape_growth: float  # 1.0: the shape family only shrinks the batch
    families_skipped: dict[str, str] = field(default_factory=dict)  # family -> why it does not fit
    headroom_bytes: int = 0  # left for the candidate in the tightest phase the plan runs
    trials_fit: bool = True  # False: even the trials (which always run) exceed the estimate; an OOM is ours
    retry: bool = False
    host_bytes: int = 0  # host memory the judge and the reference may hold on top of the worker's limit
    shared_by: int = 1  # run workers sharing the device (SandboxConfig.run_workers_per_gpu)
    share_bytes: int | None = None  # shared_by > 1: this worker's share (free_bytes is at most that)

    @property
    def headroom_ok(self) -> bool:
        """The candidate had the headroom the rules promise it (its own OOM is then its own failure)."""
        return self.headroom_bytes >= HEADROOM * self.footprint.total

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["footprint"] = {**out["footprint"], "total": self.footprint.total}
        out["headroom_factor"] = HEADROOM
        out["headroom_ok"] = self.headroom_ok
        return out


def trial_bytes(f: Footprint) -> int:
    return 4 * f.inputs + 5 * f.outputs + f.workspace


def family_bytes(f: Footprint, scale: float = 1.0) -> int:
    return int(scale * (4 * f.inputs + 4 * f.outputs + f.workspace))


def timing_bytes(f: Footprint, sets: int) -> int:
    return (sets + 3) * f.inputs + 2 * f.outputs + f.workspace


def plan(
    footprint: Footprint,
    free_bytes: int,
    families: Sequence[str],
    wanted_sets: int,
    device_type: str = "cuda",
    free_source: str = "device",
    retry: bool = False,
    shared_by: int = 1,
    share_bytes: int | None = None,
) -> MemoryPlan:
    """The memory plan of one request (see the module doc); pure."""
    f = footprint
    usable = max(0, free_bytes - RESERVE.get(device_type, 0))
    headroom = int(HEADROOM * f.total)
    margin = RETRY_MARGIN if retry else 1.0
    cap = INPUT_BYTES_BUDGET.get(device_type, GiB) // max(f.inputs, 1)
    fit = (usable - headroom - timing_bytes(f, 0)) // max(f.inputs, 1)
    sets = 1 if retry else int(max(1, min(max(1, wanted_sets), cap, fit)))
    needs = {"trials": trial_bytes(f), "timing": timing_bytes(f, sets)}
    skipped: dict[str, str] = {}
    for name in families:
        # init_args: both models rebuilt, and the reference once more with the task's own arguments
        need = int(margin * family_bytes(f)) + (3 * f.params if name == "init_args" else 0)
        if need + headroom > usable:
            skipped[name] = _too_big(name, need, headroom, usable)
        else:
            needs[name] = need
    growth = 1.0
    if "shape" in families and "shape" not in skipped and not retry:
        grown = family_bytes(f, SHAPE_GROWTH)
        if grown + int(SHAPE_GROWTH * headroom) <= usable:
            growth, needs["shape"] = SHAPE_GROWTH, grown
    tightest = max(needs.values())
    slack = (2 if retry else 1) * f.total + scan_bytes(f) + f.params  # and the reference's parameters
    host = tightest + slack if device_type == "cpu" else f.inputs
    return MemoryPlan(
        footprint=f,
        free_bytes=int(free_bytes),
        free_source=free_source,
        timing_sets=sets,
        shape_growth=growth,
        families_skipped=skipped,
        headroom_bytes=max(0, usable - tightest),
        trials_fit=needs["trials"] <= usable,
        retry=retry,
        host_bytes=int(host),
        shared_by=shared_by,
        share_bytes=share_bytes,
    )


SCAN_CHUNK = 1 << 24  # elements per step of the comparisons and guard checks (compare.CHUNK, guard._outputs)


def scan_bytes(f: Footprint) -> int:
    """The comparisons' own temporaries: about seven float64 copies of a chunk of the output (values, their
    difference, the tolerance, masks), 14x the output for 4-byte elements below a chunk; at most ~0.9 GiB
    (CPU-measured; on a GPU the same bytes sit in ``RESERVE``)."""
    return min(14 * f.outputs, 7 * 8 * SCAN_CHUNK)


def measuring_host_bytes(input_bytes: int, device_type: str) -> int:
    """The host allowance while the footprint is measured (inputs by their shapes, before any exist): on a
    CPU the inputs, the reference's output and its temporaries (taken as one input each); on a GPU one set
    of inputs built on the host."""
    return 3 * input_bytes if device_type == "cpu" else input_bytes


class Sections:
    """What the run worker tells its supervisor, which enforces the host-memory limit (see the module doc):
    the allowance of the judge and the reference (``allow``), and whose code runs (``candidate``: entered
    around every call of the candidate's code, by ``enforce.RequestGuard``; the judge's code otherwise).
    ``report`` sends fields of a progress message on the request's authenticated channel; it lives only
    here, in the request's guard (module state would let candidate code raise its own limit)."""

    def __init__(self, report: Callable[..., None] | None = None):
        self._report = report
        self._depth = 0

    def send(self, **fields: Any) -> None:
        if self._report is not None:
            self._report(**fields)

    def allow(self, host_bytes: int, plan: dict[str, Any] | None = None) -> None:
        self.send(host_bytes=int(host_bytes), memory_plan=plan)

    @contextlib.contextmanager
    def candidate(self) -> Iterator[None]:
        self._depth += 1
        if self._depth == 1:
            self.send(owner="candidate")
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.send(owner="judge")


def _too_big(name: str, need: int, headroom: int, usable: int) -> str:
    return (
        f"memory plan: the {name} family needs {size(need)} plus {size(headroom)} of headroom for the "
        f"candidate, {size(usable)} usable"
    )


def size(n: float) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def free_bytes(
    device: torch.device, budget_gb: float | None, shared_by: int = 1
) -> tuple[int, str, int | None]:
    """(bytes, source, share): the free memory the judge may plan with, and where that number comes from.
    The device's (CUDA: the driver's free memory plus the blocks the allocator caches unused, which it gives
    back itself before failing an allocation; CPU: available RAM); with ``shared_by`` run workers on the
    device, at most this worker's ``share`` (``device_share``); the configured budget when smaller still."""
    if device.type == "cuda":
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        free, source = int(torch.cuda.mem_get_info(device)[0]) + max(0, cached), "device"
    else:
        free, source = _host_available(), "device"
    share = device_share(device, shared_by) if shared_by > 1 else None
    if share is not None and share < free:
        free, source = share, "share"
    if budget_gb is not None and budget_gb * GiB < free:
        free, source = int(budget_gb * GiB), "budget"
    return free, source, share


def device_share(device: torch.device, shared_by: int) -> int:
    """This run worker's share of a device that ``shared_by`` workers share: the device's total memory over
    ``shared_by``, less what this process already holds (CUDA: its live tensors; the worker caps its
    allocator at the same fraction, ``cap_to_share``. CPU: its resident memory). The free memory alone
    would let each of N idle workers plan with all of it, and their requests then fail each other."""
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        held = torch.cuda.memory_allocated(device)
    else:
        import psutil

        total, held = psutil.virtual_memory().total, psutil.Process().memory_info().rss
    return max(0, total // max(1, shared_by) - held)


def cap_to_share(device: torch.device, shared_by: int) -> None:
    """With ``shared_by`` run workers on one GPU, cap this process's allocator at its share (torch raises an
    out-of-memory error past it): a candidate that blows up its memory then fails alone (its own OOM, inside
    its headroom), not the requests of the workers next to it. Set per request before any candidate code;
    the default (one worker per GPU) leaves the allocator alone."""
    if device.type == "cuda" and shared_by > 1:
        torch.cuda.set_per_process_memory_fraction(1.0 / shared_by, device)


def _host_available() -> int:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - no psutil: plan as if memory were plentiful (the RSS limit still holds)
        return 1 << 50


def release(device: torch.device) -> None:
    """Between phases: drop the judge's dead tensors and give the allocator's cached blocks back."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


RELEASE_ABOVE = 256 * 2**20  # footprints from which freeing between phases is worth a collection


def between_phases(req: Any) -> None:
    """Free what the last phase left (its tensors are dead by now) before the next one allocates: only for
    large footprints, where the cached blocks matter and a collection costs nothing by comparison."""
    plan = getattr(req, "memory", None)
    if plan is not None and plan.footprint.total >= RELEASE_ABOVE:
        release(req.device)


def measure(run_ref, inputs: list[Any], params: int, device: torch.device) -> Footprint:
    """One reference call on ``inputs`` (fresh ones: nobody else sees its answer), measured."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    out = run_ref(inputs)
    out_bytes = nbytes(out)
    workspace = 0
    if cuda:
        torch.cuda.synchronize(device)
        workspace = max(0, torch.cuda.max_memory_allocated(device) - base - out_bytes)
    return Footprint(nbytes(inputs), out_bytes, workspace, params)


def param_bytes(model: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
