"""Memory before running (issue 31): whether this machine can judge a problem at all, decided from the
problem's source before anything large exists, so a problem too large for the host (or the device) gets the
``insufficient_memory`` verdict (no reward, one line) instead of the kernel's OOM killer.

``estimate`` needs no real tensor: the inputs come from ``get_inputs`` on the meta device (shapes and dtypes,
no data; a tensor built from numpy is real, counted and moved there); the reference is built there too and
called once on them under ``_Peak``, a dispatch mode that adds up the bytes each op allocates and drops them
when their last tensor dies, so the dry run gives the reference's outputs and the peak of its temporaries
(``memory.Footprint``, the units of the memory plan). A reference that cannot run on the meta device
(data-dependent code, an op without a meta kernel) leaves only what its inputs and parameters take: a lower
bound (``exact`` False).

``required_bytes`` is what the trials hold at their peak (``memory.trial_bytes``: the trials always run),
the parameters of the reference and of the candidate (assumed as large), the comparisons' temporaries on a
CPU (the CUDA context's reserve on a GPU), with a margin. ``check`` compares that with the free memory the
worker may use (``memory.free_bytes`` without the configured budget: a budget caps the plan, it is not a
limit of the machine) and returns the verdict's payload when it does not fit. On a CPU the worker's own
host-memory limit does not bind here: the supervisor raises it by the plan's ``host_bytes`` (the judge's
own needs), so the host's available memory is the limit.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ...rules.result import INSUFFICIENT_MEMORY, message
from ..check import memory
from ..check.inputs import nbytes, problem_module

MARGIN = 1.1  # the estimate leaves out the allocator's rounding and small tensors of the judge's own


@dataclass(frozen=True)
class Estimate:
    footprint: memory.Footprint
    exact: bool  # False: the dry run failed; outputs and temporaries unknown (a lower bound)
    why: str = ""  # exact False: why the dry run failed


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _storages(tensors: Iterable[Any]) -> set[int]:
    return {_key(t) for t in tensors if isinstance(t, torch.Tensor)}


class _Peak(TorchDispatchMode):
    """Live bytes of the storages the ops allocate (not those in ``known``: inputs, parameters), and their
    peak. A storage counts until the last tensor seen on it dies (views share it)."""

    def __init__(self, known: set[int]):
        super().__init__()
        self.known = known
        self.live: dict[int, list[int]] = {}  # storage -> [bytes, tensors alive on it]
        self.now = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out

    def _track(self, t: torch.Tensor) -> None:
        key = _key(t)
        if key in self.known:
            return
        entry = self.live.get(key)
        if entry is None:
            entry = self.live[key] = [t.untyped_storage().nbytes(), 0]
            self.now += entry[0]
            self.peak = max(self.peak, self.now)
        entry[1] += 1
        weakref.finalize(t, self._drop, key)

    def _drop(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                self.now -= entry[0]
                del self.live[key]


def estimate(problem: Any) -> Estimate | None:
    """The reference's footprint from a dry run on the meta device (see the module doc); None when even its
    inputs cannot be built there (data-dependent inputs: unknown until built)."""
    with torch.random.fork_rng(devices=[]):
        try:
            module = problem_module(problem)
            with torch.device("meta"):
                inputs = list(module.get_inputs())
        except Exception:  # noqa: BLE001 - .item(), data-dependent shapes: no estimate, judged as before
            return None
        size = nbytes(inputs)
        # Tensors built outside torch's factories (numpy, ``from_numpy``) are real: counted, then moved to the
        # meta device so the dry run computes nothing.
        inputs = [v.to("meta") if isinstance(v, torch.Tensor) and not v.is_meta else v for v in inputs]
        try:
            with torch.device("meta"):
                model = module.Model(*module.get_init_inputs())
        except Exception as exc:  # noqa: BLE001 - a constructor that needs data
            return Estimate(memory.Footprint(size, 0), False, _line(exc))
        params = memory.param_bytes(model) if isinstance(model, torch.nn.Module) else 0
        known = _storages(inputs) | _storages([*model.parameters(), *model.buffers()])
        peak = _Peak(known)
        try:
            with torch.no_grad(), torch.device("meta"), peak:
                out = model(*inputs)
        except Exception as exc:  # noqa: BLE001 - an op without a meta kernel, data-dependent code
            return Estimate(memory.Footprint(size, 0, 0, params), False, _line(exc))
        out_bytes = nbytes(out)
        return Estimate(memory.Footprint(size, out_bytes, max(0, peak.peak - out_bytes), params), True)


def _line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def required_bytes(f: memory.Footprint, device_type: str) -> int:
    """What judging needs at least: the trials' peak, both models' parameters, the comparisons' temporaries
    (CPU) or the CUDA context's reserve, with ``MARGIN``."""
    extra = memory.scan_bytes(f) if device_type == "cpu" else memory.RESERVE.get(device_type, 0)
    return int(MARGIN * (memory.trial_bytes(f) + 2 * f.params + extra))


def check(problem: Any, device: torch.device, shared_by: int = 1) -> dict[str, Any] | None:
    """The ``insufficient_memory`` payload when the problem cannot be judged in the memory this worker may
    use, else None (also when nothing can be estimated). Allocates nothing the size of the problem."""
    est = estimate(problem)
    if est is None:
        return None
    need = required_bytes(est.footprint, device.type)
    free, source, _ = memory.free_bytes(device, None, shared_by)
    if need <= free:
        return None
    return insufficient(est, need, free, source, device.type)


def insufficient(est: Estimate, need: int, free: int, source: str, device_type: str) -> dict[str, Any]:
    where = "GPU" if device_type == "cuda" else "host"
    has = f"this worker's share of the {where} is" if source == "share" else f"this {where} has"
    bound = "" if est.exact else "at least "
    f = est.footprint
    error = (
        f"not enough memory to judge this problem: it needs {bound}~{memory.size(need)} "
        f"(inputs {memory.size(f.inputs)}, outputs {memory.size(f.outputs)}), {has} {memory.size(free)} free"
    )
    text = "not the candidate's failure: no reward; the problem was not run (estimated on the meta device)"
    if not est.exact:
        text += f"; the reference's dry run failed ({est.why}), so only its inputs and parameters count"
    return {
        "status": INSUFFICIENT_MEMORY,
        "stage": "load",
        "error": error,
        "messages": [message("note", text)],
        "memory_estimate": {
            "footprint": {**dataclasses.asdict(f), "total": f.total},
            "exact": est.exact,
            "required_bytes": need,
            "free_bytes": free,
            "free_source": source,
        },
    }
