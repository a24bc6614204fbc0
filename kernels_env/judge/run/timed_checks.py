"""Timing the candidate, and the checks after its timed calls (catalogue #5, #6, #7, #9, #16).

The timed calls run without interception (its overhead must not be timed), under the audit hook only
(``RequestGuard.tripwires``: introspection, file writes, subprocesses). Afterwards:

1. the timing input sets are unchanged (fingerprints taken before timing: ``input_mutation``);
2. one profiler-only audit call on an input set the candidate was just timed on (``TimingAudit``): a replayed
   answer launches no kernel (``no_custom_kernel``), PyTorch compute shows in the trace (``forbidden_op``);
   then threads, judge code, torch global state and the reference (``RequestGuard.after_timing``);
3. two *unguarded* correctness re-checks: on fresh inputs (new storage, new values: a cache keyed on shapes
   replays a stale answer) and on a timed input set refilled in place with new values (same objects, pointers
   and version counters: a cache keyed on any of them replays a stale answer). A wrong answer is
   ``recheck_mismatch``;
4. on a GPU the median time must not beat the roofline floor (``below_roofline``).

Without timing (``time_candidate`` false) the same checks run on one input set. How many sets rotate is the
request's memory plan's (``kernels_env.judge.check.memory``): at most ``INPUT_BYTES_BUDGET`` of inputs at
once.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ...guard import GuardViolation, Violation
from ...guard._checks import RECHECK_MISMATCH
from ...rules.protocols import JudgeSettings
from ..check.compare import compare
from ..check.inputs import clone, fresh_seed, make_inputs, nbytes
from ..check.memory import INPUT_BYTES_BUDGET, between_phases
from ..timing.baselines import set_precision
from ..timing.timer import time_callable
from .enforce import RequestGuard, fingerprint, input_mutation
from .request import JudgeRequest
from .verdict import call_candidate, call_problem, rejected

CPU_TIMING = {"warmup_iters": 1, "min_iters": 3, "max_iters": 10, "target_time_s": 0.2}


def timing_settings(s: JudgeSettings, device: torch.device) -> dict[str, Any]:
    timing = dict(s.timing)
    if device.type == "cpu":
        timing.update({k: min(timing[k], v) if k != "target_time_s" else v for k, v in CPU_TIMING.items()})
        timing["min_iters"] = min(timing["min_iters"], timing["max_iters"])
    return timing


def input_sets(problem, s: JudgeSettings, device: torch.device, wanted: int | None = None) -> list:
    def one() -> list[Any]:
        return call_problem("get_inputs()", lambda: make_inputs(problem, fresh_seed(), "random", device))

    first = one()
    wanted = max(1, int(s.timing["num_input_sets"] if wanted is None else wanted))
    k = max(1, min(wanted, INPUT_BYTES_BUDGET[device.type] // max(nbytes(first), 1)))
    return [first] + [one() for _ in range(k - 1)]


def run(req: JudgeRequest, model, run_ref) -> dict | None:
    """Time (when asked) and check; the candidate's timing stats or None. Failures raise ``Verdict``."""
    problem, s, device, guard, progress = req.problem, req.settings, req.device, req.guard, req.progress
    where = req.where("timing")
    planned = req.memory.timing_sets if req.memory is not None else None  # what fits next to the rest
    sets = input_sets(problem, s, device, planned if s.time_candidate else 1)
    before = [fingerprint(x) for x in sets]
    stats = None
    if s.time_candidate:
        stats = _time(model, sets, s, device, guard, where)
        stats["input_sets"] = len(sets)
    progress("timing", "audit after timing")
    call_candidate(guard.after_timing, model, sets[0], **where)
    if [fingerprint(x) for x in sets] != before:
        raise rejected(input_mutation("during the timed calls"), "timing")
    progress("timing", "re-checks")
    del sets[1:]  # the re-checks need one timed set: the others' memory goes to the fresh inputs
    between_phases(req)
    fresh = make_inputs(problem, fresh_seed(), "random", device)
    _recheck(req, model, fresh, "fresh inputs", run_ref)
    refill_in_place(sets[0], make_inputs(problem, fresh_seed(), "random", device))
    out = _recheck(req, model, sets[0], "a timed input set refilled in place", run_ref)
    if stats is not None and device.type == "cuda":
        roofline = functools.partial(guard.roofline, shared_by=s.device_shared_by)
        stats.update(call_candidate(roofline, stats["median_ms"], sets[0], out, **where))
    return stats


def refill_in_place(old_set, new_set) -> None:
    """New values into the tensors of ``old_set``, leaving everything a cache could key on as it was: the
    objects, data pointers, shapes, strides and autograd version counters (written through ``.data``, whose
    writes the version counter does not see; ``copy_`` bumps it, and a memo keyed on ``(id, _version)``
    replayed a stale answer unseen: red-team ``replay_by_tensor_identity``, ``batch_and_skip``)."""
    for old, new in zip(old_set, new_set):
        if isinstance(old, torch.Tensor):
            with torch.no_grad():
                old.data.copy_(new)


def _time(model, sets, s, device, guard: RequestGuard, where) -> dict[str, Any]:
    """Time ModelNew exactly as the baselines are timed: the same loop, no_grad and precision set once
    around it (not per call); only the audit hook is on."""

    def timed() -> dict[str, Any]:
        with guard.tripwires():
            return time_callable(model, sets, timing_settings(s, device), device)

    set_precision(bool(s.allow_tf32))
    try:
        with torch.no_grad():
            return call_candidate(timed, **where)
    finally:
        set_precision(False)


def _recheck(req: JudgeRequest, model, inputs, what: str, run_ref) -> Any:
    """One unguarded call on ``inputs`` (these very tensors: their pointers matter), judged like a trial."""
    s, guard, where = req.settings, req.guard, req.where("timing")
    tolerances = s.tolerances
    pristine = clone(inputs)

    def unguarded() -> Any:
        set_precision(bool(s.allow_tf32))
        try:
            with torch.no_grad(), guard.tripwires():
                out = model(*inputs)
            if guard.device.type == "cuda":
                torch.cuda.synchronize(guard.device)
            return out
        finally:
            set_precision(False)

    got = call_candidate(unguarded, **where)
    call_candidate(guard.verify, "during the re-check", **where)
    expected = call_problem("Model.forward", run_ref, clone(pristine))
    call_candidate(guard.check_output, got, expected, inputs, tolerances, False, **where)
    mismatch = call_candidate(compare, expected, got, tolerances, **where)
    if mismatch is not None:  # never blame the candidate for a reference that disagrees with itself
        again = call_problem("Model.forward", run_ref, clone(pristine))
        if compare(expected, again, tolerances) is not None:
            mismatch = compare(again, got, tolerances)
    if mismatch is not None:
        text = f"after the timed calls, on {what}: {mismatch['text']}"
        raise rejected(
            GuardViolation(Violation(RECHECK_MISMATCH, text, {**mismatch, "inputs": what})), "timing"
        )
    req.correctness["rechecks"].append({"inputs": what, "ok": True})
    return got
