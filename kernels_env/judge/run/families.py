"""Adversarial input families in the judge: what is checked for each, and how it is reported.

The run worker (``kernels_env.judge.run.harness``) runs the judge's ``families`` after the default trials,
each on fresh
inputs from ``make_inputs(problem, seed, family)`` (``kernels_env.judge.check.adversarial``). A family applies
only where
the reference is defined: its inputs can be built, the reference runs on them, gives the same answer twice
and not all NaN; otherwise it is ``skipped`` with the reason. The candidate runs under the guard (a violation
is a rejection, as anywhere), its output passes the output contract, and its values are compared with the
reference's by the judge's comparison (NaN/Inf positions exactly; ``denormal`` and ``large`` with ``atol``
scaled by the output's magnitude; where float32 itself cannot meet the tolerance on a family's inputs, the
tolerance is widened by the reference's own error against float64, ``kernels_env.judge.check.conditioning``).
``init_args`` perturbs the float constructor arguments instead of the
inputs (hyper-parameters baked into a candidate, catalogue #11).

Each family is reported under ``correctness.families[name]``: ``applicable``, ``status`` (``pass``,
``fail``, ``error``: the candidate raised, ``skipped``), ``fatal``, ``reason``, ``seed``,
``max_abs_error``, ``max_rel_error``, ``first_index``, ``reference_fp32_error`` (None unless computed). A
``fail`` or ``error`` of a *fatal* family (the protocol's ``fatal_families``, see
``kernels_env.rules.protocols``) makes the verdict ``incorrect``; the others are reported only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ...guard._outputs import tensors
from ...rules.result import REJECTED
from ...rules.result import message as _message
from ..build.errors import ProblemError
from ..check import conditioning, memory
from ..check.adversarial import RELATIVE_FAMILIES, SHAPE_GROW, SHAPE_GROWTH
from ..check.compare import compare, max_errors
from ..check.inputs import clone, fresh_seed, make_inputs
from ..check.oom import OutOfMemory, is_oom
from .hygiene import restore_global_state
from .request import JudgeRequest
from .verdict import Verdict, call_candidate

INIT_ARGS = "init_args"
SHAPE = "shape"
PASS, FAIL, ERROR, SKIPPED = "pass", "fail", "error", "skipped"


def result(name: str, fatal: bool, status: str, reason: str = "", seed: int | None = None, **details) -> dict:
    return {
        "applicable": status != SKIPPED,
        "status": status,
        "fatal": fatal,
        "reason": reason,
        "seed": seed,
        "max_abs_error": details.get("max_abs_error"),
        "max_rel_error": details.get("max_rel_error"),
        "first_index": details.get("first_index"),
        "reference_fp32_error": details.get("reference_fp32_error"),  # E (check.conditioning)
    }


def undefined(expected: Any, again: Any, tolerances: Mapping[str, Sequence[float]]) -> str:
    """Why the reference does not define an answer on these inputs ('' when it does)."""
    floats = [t for t in tensors(expected) if t.is_floating_point() or t.is_complex()]
    if floats and all(t.numel() and bool(torch.isnan(t).all()) for t in floats):
        return "reference output is all NaN on these inputs"
    if compare(expected, again, tolerances) is not None:
        return "the reference gives different answers for the same inputs"
    return ""


def scaled(name: str, expected: Any, tolerances: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    """Tolerances for a family: relative families scale ``atol`` by the largest finite output magnitude."""
    if name not in RELATIVE_FAMILIES:
        return {k: list(v) for k, v in tolerances.items()}
    scale = max((finite_peak(t) for t in tensors(expected) if t.is_floating_point()), default=0.0) or 1.0
    return {k: [float(a) * scale, float(r)] for k, (a, r) in tolerances.items()}


CHUNK = 1 << 24  # elements per step of a reduction over an output (no temporaries of the output's size)


def finite_peak(t: torch.Tensor) -> float:
    """The largest finite magnitude in ``t`` (0 when none), in chunks; float8 and other narrow types are
    widened chunk by chunk first (torch has no isfinite for them)."""
    flat = t.detach().reshape(-1)
    peak = 0.0
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start : start + CHUNK]
        part = (part if part.dtype in (torch.float32, torch.float64) else part.float()).abs()
        part = torch.where(torch.isfinite(part), part, torch.zeros((), dtype=part.dtype, device=part.device))
        peak = max(peak, float(part.max()))
    return peak


def judge(
    name: str,
    fatal: bool,
    seed: int,
    expected: Any,
    got: Any,
    tolerances,
    run64: Callable[[], Any] | None = None,
) -> dict:
    """Compare one family's answer with the reference's; the family's result. On a mismatch, ``run64`` (the
    reference in float64 on the same inputs) decides whether float32 itself misses the tolerance there; the
    comparison is then repeated with the tolerance widened by the reference's own error
    (``kernels_env.judge.check.conditioning``)."""
    tol = scaled(name, expected, tolerances)
    mismatch = compare(expected, got, tol)
    err, note_ = None, ""
    if mismatch is not None and run64 is not None:
        err, why = conditioning.float64_error(run64, expected)
        if err is None:
            note_ = f"; the float64 reference could not be computed ({why})"
        elif err > 0:
            again = compare(expected, got, conditioning.widened(tol, err))
            note_ = (
                f"atol + {conditioning.WIDENING:g} x the float32 reference's own error against float64"
                f" here ({err:.3g})"
            )
            if again is None:
                abs_err, rel_err = max_errors(expected, got)
                return result(
                    name, fatal, PASS, "within " + note_, seed,
                    max_abs_error=abs_err, max_rel_error=rel_err, reference_fp32_error=err,
                )  # fmt: skip
            mismatch, note_ = again, "; beyond " + note_
    if mismatch is None:
        abs_err, rel_err = max_errors(expected, got)
        return result(name, fatal, PASS, "", seed, max_abs_error=abs_err, max_rel_error=rel_err)
    return result(
        name,
        fatal,
        FAIL,
        mismatch["text"] + note_,
        seed,
        max_abs_error=mismatch.get("max_abs_error"),
        max_rel_error=mismatch.get("max_rel_error"),
        first_index=mismatch.get("first_index"),
        reference_fp32_error=err,
    )


def perturbed_init_args(init_args: Sequence[Any]) -> list[Any] | None:
    """Float constructor arguments moved (x * 1.5 + 0.25); None when there is none to move."""
    out = [a * 1.5 + 0.25 if type(a) is float else a for a in init_args]
    return out if out != list(init_args) else None


def note(text: str) -> dict:
    return _message("note", text)


def first_fatal_failure(results: Mapping[str, Mapping[str, Any]]) -> str | None:
    return next((n for n, r in results.items() if r["fatal"] and r["status"] in (FAIL, ERROR)), None)


def run_families(req: JudgeRequest, runners, rebuild, init_args) -> str | None:
    """Run the judge's families after the trials (see the module doc); the first failed fatal family's name
    (or None). Guard violations are raised (a rejection, as in any trial)."""
    s, progress, notes = req.settings, req.progress, req.notes
    results = req.correctness["families"]
    for name in s.families:
        memory.between_phases(req)  # the last family's inputs and outputs are dead: free them first
        progress("correctness", f"input family {name}")
        fatal = name in s.fatal_families
        too_big = req.memory.families_skipped.get(name) if req.memory is not None else None
        if too_big:
            results[name] = result(name, fatal, SKIPPED, too_big)
            notes.append(note(f"input family {name!r} skipped: {too_big}"))
            continue
        if name == INIT_ARGS:
            args = perturbed_init_args(init_args)
            if args is None:
                results[name] = result(name, fatal, SKIPPED, "not applicable: no float constructor arguments")
                continue
            try:
                runners_for = rebuild(args)  # (reference, guarded candidate) runners of rebuilt models
            except ProblemError as exc:
                results[name] = result(name, fatal, SKIPPED, f"the reference does not build with them: {exc}")
                continue
            except Verdict as v:
                if v.status == REJECTED:
                    raise
                results[name] = result(name, fatal, ERROR, f"ModelNew{tuple(args)}: {v.payload['error']}")
                continue
            results[name] = _one(req, name, "random", fatal, runners_for[:2], control=runners_for[2:])
            del runners_for  # the rebuilt models: freed before the next family
        elif name == SHAPE:
            results[name] = _shape(req, fatal, runners)
        else:
            results[name] = _one(req, name, name, fatal, runners)
        if results[name]["status"] in (FAIL, ERROR) and not fatal:
            notes.append(note(f"input family {name!r} ({results[name]['status']}, reported only): "
                              f"{results[name]['reason']}"))  # fmt: skip
    return first_fatal_failure(results)


def _shape(req: JudgeRequest, fatal: bool, runners) -> dict:
    """The batch shrunk, then grown where the memory plan allows: a size baked into a kernel either reads
    past a smaller input or leaves the tail of a larger output unwritten (poisoned: rejected)."""
    shrunk = _one(req, SHAPE, SHAPE, fatal, runners)
    growth = req.memory.shape_growth if req.memory is not None else SHAPE_GROWTH
    if shrunk["status"] in (FAIL, ERROR) or growth <= 1.0:
        if growth <= 1.0 and shrunk["status"] != SKIPPED:
            shrunk["reason"] = (shrunk["reason"] + "; " if shrunk["reason"] else "") + (
                "batch shrunk only: the memory plan leaves no room to grow it"
            )
        return shrunk
    grown = _one(req, SHAPE, SHAPE_GROW, fatal, runners)
    if grown["status"] == SKIPPED and shrunk["status"] != SKIPPED:
        shrunk["reason"] = f"batch shrunk only: not grown ({grown['reason']})"
        return shrunk
    if grown["status"] in (FAIL, ERROR):
        grown["reason"] = f"batch grown {growth:g}x: {grown['reason']}"
        return grown
    if shrunk["status"] == PASS and grown["status"] == PASS:
        grown["reason"] = f"batch shrunk and grown {growth:g}x"
    return grown


def _one(req: JudgeRequest, name: str, family: str, fatal: bool, runners, control=()) -> dict:
    """One family's result. ``control`` (``init_args``): builds the reference with the task's own constructor
    arguments and the rebuilt models' weights; when its answer is the rebuilt reference's, the reference
    ignores its arguments (its forward reads module globals, say) and the family cannot tell a candidate
    that honours them from one that bakes them in: skipped, with that reason."""
    run_ref, run_new = runners
    tolerances, where = req.settings.tolerances, req.where("correctness")
    restore_global_state()
    seed = fresh_seed()
    try:
        inputs = make_inputs(req.problem, seed, family, req.device)
    except ValueError as exc:
        return result(name, fatal, SKIPPED, f"not applicable: {exc}", seed)
    except Exception as exc:  # noqa: BLE001 - the task cannot build such inputs: the family does not apply
        _judges_oom(exc, "the family's inputs")
        return result(
            name, fatal, SKIPPED, f"inputs cannot be built: {type(exc).__name__}: {exc}"[:300], seed
        )
    try:
        expected = run_ref(clone(inputs))
        again = run_ref(clone(inputs))
    except Exception as exc:  # noqa: BLE001 - the reference is undefined here
        _judges_oom(exc, "the reference on the family's inputs")
        reason = f"reference fails on these inputs: {type(exc).__name__}: {exc}"[:300]
        return result(name, fatal, SKIPPED, reason, seed)
    reason = undefined(expected, again, tolerances)
    reason = reason or _ignores_arguments(control, inputs, expected, tolerances)
    if reason:
        return result(name, fatal, SKIPPED, reason, seed)
    new_in = clone(inputs)
    try:
        got = call_candidate(run_new, new_in, **where)
        call_candidate(req.guard.check_output, got, expected, new_in, tolerances, **where)
    except Verdict as v:
        if v.status == REJECTED:
            raise
        return result(name, fatal, ERROR, v.payload["error"] or v.status, seed)
    float64 = getattr(run_ref, "float64", None)  # the harness's reference runner has one
    run64 = None if float64 is None else (lambda: float64(clone(inputs)))
    return judge(name, fatal, seed, expected, got, tolerances, run64)


def _ignores_arguments(control, inputs, expected, tolerances) -> str:
    """Why the ``init_args`` family does not apply ('' when it does, or when that cannot be told)."""
    if not control:
        return ""
    try:
        base = control[0]()(clone(inputs))
    except Exception as exc:  # noqa: BLE001 - cannot tell: the family runs as before
        _judges_oom(exc, "the reference with the task's own arguments")
        return ""
    if compare(base, expected, tolerances) is not None:
        return ""
    return (
        "not applicable: the reference's output does not change under the perturbed constructor arguments"
        " (its forward does not read them, e.g. it reads module globals)"
    )


def _judges_oom(exc: Exception, what: str) -> None:
    """Out of memory while the judge builds a family's inputs or runs the reference: never a skipped family
    (the plan decides what runs), the judge's OOM (retried with the smaller plan)."""
    if is_oom(exc):
        raise OutOfMemory(f"{what}: {type(exc).__name__}: {str(exc)[:200]}", False) from None
