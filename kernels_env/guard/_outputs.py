"""What forward returned: plain tensors with real storage, the reference's structure, device, dtype, shape
and a dense layout (catalogue #8, #10), no never-written (poisoned) elements (#4, #13), no aliasing of an
input the reference does not alias, a fresh storage per call, and the same answer when asked twice (#13).

Any non-overlapping layout is accepted (channels-last, a transposed result, a gapped strided view such as a
slice): KernelBench compares values and shapes, not strides, and such a tensor has its own storage slot per
element. Only stride 0 (expanded) and overlapping layouts are refused, unless the reference itself returns
exactly those strides; a stride that differs from the reference's is noted in the verdict
(``layout_notes``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from . import _checks
from ._checks import Violation
from ._memory import poisoned_count


def _non_overlapping(t: torch.Tensor) -> bool:
    """No storage slot behind two elements (no stride 0, no overlapping windows): with the dims of size > 1
    sorted by stride, each stride lies beyond the furthest slot the smaller ones reach. Every dense memory
    format passes, and so do gapped views (a slice, a step): skipped slots are not part of the output."""
    if t.numel() <= 1:
        return True
    reach = 0  # the furthest offset the dims so far address
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride <= reach:
            return False
        reach += stride * (size - 1)
    return True


_Tensor = torch.Tensor  # captured at import: isinstance/type checks against the real class


def _structure(obj: Any) -> Any:
    if type(obj) in (tuple, list):
        return [_structure(o) for o in obj]
    return "T" if isinstance(obj, _Tensor) else type(obj).__name__


def leaves(obj: Any, exact: bool = True) -> list[Any]:
    """The leaves of nested tuples and lists, in order. ``exact`` (a candidate's output): only the real
    ``tuple``/``list`` types are opened, so a subclass cannot change what is iterated; otherwise (the
    judge's own values: references, inputs) subclasses such as ``torch.return_types`` and dict values are
    opened too."""
    if type(obj) in (tuple, list) if exact else isinstance(obj, (tuple, list)):
        return [x for o in obj for x in leaves(o, exact)]
    if not exact and isinstance(obj, dict):
        return [x for o in obj.values() for x in leaves(o, exact)]
    return [obj]


def tensors(obj: Any) -> list[torch.Tensor]:
    """Every tensor in a nested structure of the judge's own values (``leaves(obj, exact=False)``)."""
    return [x for x in leaves(obj, exact=False) if isinstance(x, _Tensor)]


def _storage_ptr(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - no storage: caught by the storage check
        return None


def check_outputs(
    candidate: Any, reference: Any, inputs: Iterable[Any] = (), reference_aliases_input: bool = False
) -> list[Violation]:
    """Contract of the candidate's output against the reference's. Returns all violations found (first one
    is the most fundamental)."""
    if type(reference) in (tuple, list) and type(candidate) not in (tuple, list):
        return [
            Violation(
                _checks.OUTPUT_TYPE,
                f"forward returned {type(candidate).__qualname__}, expected a "
                f"{type(reference).__name__} of {len(reference)} outputs",
                {"structure": True},
            )
        ]
    refs, cands = leaves(reference), leaves(candidate)
    if len(refs) != len(cands):
        return [
            Violation(
                _checks.OUTPUT_TYPE,
                f"forward returned {len(cands)} outputs, expected {len(refs)}",
                {"structure": True},
            )
        ]
    input_ptrs = {_storage_ptr(t) for t in leaves(list(inputs)) if type(t) is _Tensor} - {None, 0}
    out: list[Violation] = []
    for i, (r, c) in enumerate(zip(refs, cands)):
        if type(r) is not _Tensor:
            continue
        kind = type(c)  # never c.__class__: a forged object can lie about its class
        if kind is not _Tensor:
            out.append(
                Violation(
                    _checks.OUTPUT_TYPE,
                    f"output {i} is {kind.__module__}.{kind.__qualname__}, not a plain torch.Tensor",
                    {"output": i, "type": f"{kind.__module__}.{kind.__qualname__}"},
                )
            )
            continue
        if c.device.type == "meta" or c.layout != torch.strided or c.is_conj() or c.is_neg():
            out.append(
                Violation(
                    _checks.OUTPUT_STORAGE,
                    f"output {i} has no materialised data (device "
                    f"{c.device}, layout {c.layout}, lazy conj/neg {c.is_conj() or c.is_neg()})",
                    {"output": i},
                )
            )
            continue
        ptr = _storage_ptr(c)
        if (
            ptr is None
            or (ptr == 0 and c.numel() > 0)
            or c.untyped_storage().nbytes()
            < (
                (c.storage_offset() + sum((s - 1) * st for s, st in zip(c.shape, c.stride())) + 1)
                * c.element_size()
                if c.numel()
                else 0
            )
        ):
            out.append(
                Violation(_checks.OUTPUT_STORAGE, f"output {i} has no real storage behind it", {"output": i})
            )
            continue
        if c.device != r.device:
            out.append(
                Violation(
                    _checks.OUTPUT_DEVICE, f"output {i} on {c.device}, expected {r.device}", {"output": i}
                )
            )
        if c.dtype != r.dtype:
            out.append(
                Violation(_checks.OUTPUT_DTYPE, f"output {i} is {c.dtype}, expected {r.dtype}", {"output": i})
            )
        if tuple(c.shape) != tuple(r.shape):
            out.append(
                Violation(
                    _checks.OUTPUT_SHAPE,
                    f"output {i} has shape {tuple(c.shape)}, expected {tuple(r.shape)}",
                    {"output": i},
                )
            )
            continue
        if c.numel() > 1 and not _non_overlapping(c) and c.stride() != r.stride():
            out.append(
                Violation(
                    _checks.OUTPUT_STRIDES,
                    f"output {i} has strides {c.stride()} for shape {tuple(c.shape)}: expanded or "
                    "overlapping (any non-overlapping layout, gapped views included, or the reference's own "
                    "is accepted)",
                    {"output": i, "strides": list(c.stride())},
                )
            )
        if ptr in input_ptrs and not reference_aliases_input:
            out.append(
                Violation(
                    _checks.OUTPUT_ALIASES_INPUT, f"output {i} shares memory with an input", {"output": i}
                )
            )
    return out


def layout_notes(candidate: Any, reference: Any) -> list[str]:
    """One line per plain tensor output whose (accepted, dense) strides differ from the reference's."""
    notes = []
    for i, (r, c) in enumerate(zip(leaves(reference), leaves(candidate))):
        if type(r) is not _Tensor or type(c) is not _Tensor or c.shape != r.shape or c.numel() <= 1:
            continue
        if c.stride() != r.stride() and c.layout == torch.strided and c.device.type != "meta":
            notes.append(
                f"output {i} has strides {c.stride()}, the reference's {r.stride()} (another non-overlapping "
                "layout: accepted, values compared element by element)"
            )
    return notes


def reused_output_violations(answers: list[Any]) -> list[Violation]:
    """Outputs of separate calls, all still held by the judge, must not share storage: a solution that
    returns one static buffer (a replayed CUDA graph's output, a buffer kept from ``__init__``) overwrote
    the earlier answer with the later one, so whatever a caller holds changes under it."""
    seen: dict[int, int] = {}
    for call, answer in enumerate(answers):
        for i, t in enumerate(leaves(answer)):
            if type(t) is not _Tensor or t.numel() == 0 or t.device.type == "meta":
                continue
            ptr = _storage_ptr(t)
            if not ptr:
                continue
            if ptr in seen and seen[ptr] != call:
                return [
                    Violation(
                        _checks.OUTPUT_REUSED,
                        f"output {i} of call {call + 1} shares storage with an output of call "
                        f"{seen[ptr] + 1}: the earlier answer was overwritten (a static output buffer)",
                        {"output": i, "calls": [seen[ptr] + 1, call + 1]},
                    )
                ]
            seen.setdefault(ptr, call)
    return []


def poisoned_output_violations(candidate: Any) -> list[Violation]:
    for i, c in enumerate(leaves(candidate)):
        if type(c) is _Tensor and c.device.type != "meta":
            n, first = poisoned_count(c)
            if n:
                return [
                    Violation(
                        _checks.POISONED_OUTPUT,
                        f"{n} of {c.numel()} elements of output {i} were never "
                        f"written (still hold the poison pattern)",
                        {"output": i, "count": n, "first_index": first},
                    )
                ]
    return []


_CHUNK = 1 << 24  # elements per step: no float64 copy of a whole output


def _disagreements(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> tuple[bool, int]:
    """(NaN positions differ anywhere, number of elements beyond tolerance), in float64 chunks."""
    fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
    nan_differ, beyond = False, 0
    for start in range(0, fa.numel(), _CHUNK):
        x, y = fa[start : start + _CHUNK].double(), fb[start : start + _CHUNK].double()
        nan_differ = nan_differ or bool((torch.isnan(x) != torch.isnan(y)).any())
        beyond += int((~torch.isclose(x, y, atol=atol, rtol=rtol, equal_nan=True)).sum())
    return nan_differ, beyond


def determinism_violations(first: Any, second: Any, atol: float, rtol: float) -> list[Violation]:
    """Same inputs twice: NaN positions must match and values agree within the tolerance (bitwise
    differences from atomics are allowed and only reported as evidence)."""
    for i, (a, b) in enumerate(zip(leaves(first), leaves(second))):
        if type(a) is not _Tensor or type(b) is not _Tensor or a.shape != b.shape:
            continue
        nan_differ, n = _disagreements(a, b, atol, rtol)
        if nan_differ or n:
            return [
                Violation(
                    _checks.NONDETERMINISTIC,
                    f"output {i} differs between two runs on identical inputs "
                    f"({n} elements beyond tolerance)",
                    {"output": i, "elements": n},
                )
            ]
    return []


def _real(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return torch.view_as_real(t) if t.is_complex() else t


def constant_output_violation(candidate: Any, reference: Any, atol: float, rtol: float) -> Violation | None:
    """A candidate output that is constant (one value everywhere) where the reference's is not. Computed on
    the outputs' device (one synchronisation per output; a copy to the host cost seconds for large ones)."""
    for i, (c, r) in enumerate(zip(leaves(candidate), leaves(reference))):
        if type(c) is not _Tensor or type(r) is not _Tensor or c.device.type == "meta":
            continue
        if c.numel() < 2 or not (c.is_floating_point() or c.is_complex()):
            continue
        flat = _real(c).reshape(-1)
        first = flat[0]
        # Equality is exact in any float dtype; all-NaN counts as constant too.
        if not bool(((flat == first) | (torch.isnan(flat) & torch.isnan(first))).all()):
            continue
        ref = _real(r).to(torch.float64)
        finite = torch.isfinite(ref)
        if not bool(finite.any()):
            continue
        lo = float(torch.where(finite, ref, torch.inf).min())
        hi = float(torch.where(finite, ref, -torch.inf).max())
        peak = max(abs(lo), abs(hi))
        if (hi - lo) / 2 <= atol + rtol * peak:
            continue  # the reference itself is (nearly) constant: the task's problem, not the candidate's
        return Violation(
            _checks.CONSTANT_OUTPUT,
            f"output {i} is the constant {float(first):g} while the reference spans [{lo:.3g}, {hi:.3g}]",
            {"output": i, "reference_min": lo, "reference_max": hi},
        )
    return None
