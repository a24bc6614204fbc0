"""Inputs beyond a task's own distribution, where the reference is defined, each family judged separately.

``make_inputs(problem, seed, family)`` builds fresh inputs (new storage, new values) for one correctness trial
or timed call from the problem's own ``get_inputs()``, run in a fresh namespace so nothing a candidate did to
the problem module can leak in, with the global RNG untouched. Families:

- ``default``: the task's distribution (KernelBench: ``torch.rand``).
- ``nan_inf``: NaN, +Inf and -Inf planted in every floating input; output NaN/Inf *positions* must match.
- ``denormal``: inputs rescaled into the subnormal range; compared relative to the output's magnitude, so
  flushing to zero (fast-math) or losing them is visible.
- ``large``: inputs scaled by 1e4 (1e2 for float16): overflow-unsafe formulations (naive softmax/exp) and
  half-precision internals fail; compared relative to magnitude.
- ``zeros``: all floating inputs zero.
- ``negative``: uniform [-1, 1) for tasks whose default inputs were all non-negative (``return x`` passes
  ReLU on ``torch.rand`` inputs).
- ``shape``: the batch dimension changed (a candidate that hard-coded the task's sizes fails).
- ``noncontig`` (opt-in: KernelBench never passes such views): same values as strided, non-contiguous views.

A family applies only if the task has floating inputs to perturb, the reference runs on it and does not
return all-NaN; otherwise it is reported as skipped, with the reason.
"""

from __future__ import annotations

import math
import os
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

DEFAULT_FAMILIES = ("nan_inf", "denormal", "large", "zeros", "negative", "shape")
OPTIONAL_FAMILIES = ("noncontig",)
ALL_FAMILIES = ("default", *DEFAULT_FAMILIES, *OPTIONAL_FAMILIES)
_RELATIVE_FAMILIES = ("denormal", "large")

# Captured at import, before any candidate code runs: a candidate replacing torch.isclose & co. later does not
# change what this checker calls (catalogue #9).
_isnan, _isposinf, _isneginf, _isfinite = torch.isnan, torch.isposinf, torch.isneginf, torch.isfinite
_abs, _nonzero, _equal = torch.abs, torch.nonzero, torch.equal


# ----------------------------------------------------------------------------------------------- problems
def problem_source(problem: Any) -> tuple[str, str]:
    """(source, filename) of a problem given as a path, or an object with ``.source`` (and ``.path``)."""
    if isinstance(problem, (str, os.PathLike)) and os.path.exists(problem):
        path = os.fspath(problem)
        with open(path) as f:
            return f.read(), os.path.abspath(path)
    source = getattr(problem, "source", None)
    if isinstance(source, str):
        path = getattr(problem, "path", None) or f"<problem {getattr(problem, 'name', 'anonymous')}>"
        return source, os.fspath(path)
    if isinstance(problem, str) and "get_inputs" in problem:
        return problem, "<problem>"
    raise TypeError(
        f"cannot read a problem from {type(problem).__name__}: give a path or an object with .source"
    )


def load_problem(problem: Any, module_name: str = "kernels_env_problem") -> types.ModuleType:
    """A fresh module built from the problem's source (its constants as the author wrote them)."""
    source, filename = problem_source(problem)
    module = types.ModuleType(module_name)
    module.__file__ = filename
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - problems are trusted references
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if name not in module.__dict__:
            raise ValueError(f"problem {filename} has no {name}")
    return module


# ----------------------------------------------------------------------------------------------- inputs
def _floats(values: Sequence[Any]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()]


def _batch_size(values: Sequence[Any]) -> int | None:
    dims = [v.shape[0] for v in values if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] > 1]
    return max(set(dims), key=dims.count) if dims else None


def _plant_nan_inf(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    flat = x.reshape(-1).clone()
    n = flat.numel()
    k = max(1, n // 1000)
    picks = torch.randperm(n, generator=gen)[: 3 * k] if n >= 3 else torch.arange(n)
    flat[picks[:k]] = float("nan")
    flat[picks[k : 2 * k]] = float("inf")
    flat[picks[2 * k : 3 * k]] = float("-inf")
    return flat.reshape(x.shape)


def _transform(family: str, values: list[Any], gen: torch.Generator) -> list[Any]:
    if family == "default" or family == "noncontig":
        return values
    if family == "shape":
        batch = _batch_size(values)
        if batch is None:
            raise ValueError("no batch dimension to change")
        new = batch // 2 + 1 if batch > 2 else batch + 1
        out = []
        for v in values:
            if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == batch:
                reps = math.ceil(new / batch)
                v = v.repeat(reps, *([1] * (v.dim() - 1)))[:new].clone() if new > batch else v[:new].clone()
            out.append(v)
        return out
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel():
            if family == "nan_inf":
                v = _plant_nan_inf(v, gen)
            elif family == "denormal":
                peak = float(v.abs().max())
                v = v / peak * (torch.finfo(v.dtype).tiny * 0.5) if peak > 0 else v
            elif family == "large":
                v = v * (1e2 if v.dtype == torch.float16 else 1e4)
            elif family == "zeros":
                v = torch.zeros_like(v)
            elif family == "negative":
                v = (torch.rand(v.shape, generator=gen, dtype=torch.float64) * 2 - 1).to(v.device, v.dtype)
            else:
                raise ValueError(f"unknown input family {family!r}; known: {ALL_FAMILIES}")
        out.append(v)
    return out


def _noncontig(v: Any) -> Any:
    if not isinstance(v, torch.Tensor) or v.numel() < 2:
        return v
    if v.dim() >= 2 and v.shape[-1] > 1 and v.shape[-2] > 1:
        return v.transpose(-1, -2).contiguous().transpose(-1, -2)
    wide = torch.empty((*v.shape[:-1], v.shape[-1] * 2), dtype=v.dtype, device=v.device)
    view = wide[..., ::2]
    view.copy_(v)
    return view


def _seed_for(seed: int, family: str) -> int:
    return (seed * 1_000_003 + sum(ord(c) * 31**i for i, c in enumerate(family))) % (2**63 - 1)


def make_inputs(
    problem: Any,
    seed: int,
    family: str = "default",
    *,
    device: torch.device | str | None = None,
    module: types.ModuleType | None = None,
) -> list[Any]:
    """Fresh forward inputs for ``problem`` (path or object with ``.source``) and ``seed``, from ``family``.

    Values come from the problem's own ``get_inputs()`` under ``torch.manual_seed(seed)`` (the caller's RNG
    state is restored), then the family's transformation; tensors are moved to ``device`` if given. Every call
    returns new storage. ``module``: a module from ``load_problem`` to reuse (skips re-executing the source).
    """
    if family not in ALL_FAMILIES:
        raise ValueError(f"unknown input family {family!r}; known: {ALL_FAMILIES}")
    mod = module if module is not None else load_problem(problem)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        values = list(mod.get_inputs())
    gen = torch.Generator().manual_seed(_seed_for(seed, family))
    if family == "negative" and any(bool((v < 0).any()) for v in _floats(values)):
        raise ValueError("the task's inputs already include negative values")
    values = _transform(family, values, gen)
    values = [v.clone() if isinstance(v, torch.Tensor) else v for v in values]  # own storage, always
    if device is not None:
        values = [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]
    if family == "noncontig":
        values = [_noncontig(v) for v in values]
    return values


# ----------------------------------------------------------------------------------------------- comparison
@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    index: list[int] | None = None
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    output: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def _flat_outputs(obj: Any) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        return [x for o in obj for x in _flat_outputs(o)]
    return [obj]


def _first(mask: torch.Tensor) -> list[int]:
    idx = _nonzero(mask)
    return idx[0].tolist() if idx.numel() else []


def compare(reference: Any, candidate: Any, atol: float, rtol: float, family: str = "default") -> Comparison:
    """NaN/Inf-aware closeness of two outputs (tensors or nested tuples/lists of tensors)."""
    refs, cands = _flat_outputs(reference), _flat_outputs(candidate)
    if len(refs) != len(cands):
        return Comparison(False, f"{len(cands)} outputs, expected {len(refs)}")
    worst_abs = worst_rel = 0.0
    for i, (r, c) in enumerate(zip(refs, cands)):
        if not isinstance(r, torch.Tensor):
            if r != c:
                return Comparison(False, f"non-tensor output {i} differs: {c!r} != {r!r}", output=i)
            continue
        if not isinstance(c, torch.Tensor):
            return Comparison(False, f"output {i} is {type(c).__name__}, expected a tensor", output=i)
        if tuple(c.shape) != tuple(r.shape):
            return Comparison(False, f"output {i} shape {tuple(c.shape)} != {tuple(r.shape)}", output=i)
        if c.dtype != r.dtype:
            return Comparison(False, f"output {i} dtype {c.dtype} != {r.dtype}", output=i)
        r64, c64 = _as_real64(r), _as_real64(c.to(r.device))
        for name, fn in (("NaN", _isnan), ("+Inf", _isposinf), ("-Inf", _isneginf)):
            diff = fn(r64) != fn(c64)
            if bool(diff.any()):
                return Comparison(
                    False,
                    f"{name} positions differ in output {i} ({int(diff.sum())} elements)",
                    _first(diff),
                    output=i,
                )
        finite = _isfinite(r64)
        if not bool(finite.any()):
            continue
        err = _abs(c64 - r64)[finite]
        ref_abs = _abs(r64)[finite]
        scale = float(ref_abs.max()) if family in _RELATIVE_FAMILIES else 1.0
        bound = atol * (scale if scale > 0 else 1.0) + rtol * ref_abs
        bad = err > bound
        worst_abs = max(worst_abs, float(err.max()))
        worst_rel = max(worst_rel, float((err / ref_abs.clamp_min(torch.finfo(torch.float64).tiny)).max()))
        if bool(bad.any()):
            full = torch.zeros_like(finite)
            full[finite] = bad
            return Comparison(
                False,
                f"output {i}: {int(bad.sum())} elements beyond atol={atol:g}, rtol={rtol:g}"
                + (" (atol scaled by output magnitude)" if scale != 1.0 else ""),
                _first(full),
                float(err.max()),
                worst_rel,
                i,
            )
    return Comparison(True, "", None, worst_abs, worst_rel)


def _as_real64(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.to(torch.float64)


# ----------------------------------------------------------------------------------------------- families
@dataclass
class FamilyResult:
    family: str
    status: str  # pass | fail | skipped | error
    reason: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    index: list[int] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _all_nan(out: Any) -> bool:
    tensors = [
        t
        for t in _flat_outputs(out)
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
    ]
    return bool(tensors) and all(t.numel() and bool(_isnan(_as_real64(t)).all()) for t in tensors)


def _clone(values: Iterable[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def run_family(
    family: str,
    reference: Callable[..., Any],
    candidate: Callable[..., Any],
    problem: Any,
    seed: int,
    atol: float,
    rtol: float,
    *,
    device=None,
    module=None,
) -> FamilyResult:
    """One family: build inputs, check the reference is defined there, run the candidate first, compare.

    ``reference``/``candidate`` take the forward inputs (the caller wraps the candidate in its guard; a
    ``GuardViolation`` propagates: it is a hack, not a family failure)."""
    try:
        inputs = make_inputs(problem, seed, family, device=device, module=module)
    except ValueError as exc:
        return FamilyResult(family, "skipped", f"not applicable: {exc}")
    if family != "default" and not _floats(inputs) and family not in ("shape", "noncontig"):
        return FamilyResult(family, "skipped", "not applicable: no floating-point inputs")
    try:
        out = candidate(*_clone(inputs))
    except Exception as exc:  # noqa: BLE001 - reported per family; a guard violation is re-raised below
        if type(exc).__name__ == "GuardViolation":
            raise
        cand_error = f"{type(exc).__name__}: {str(exc)[:300]}"
        out = None
    else:
        cand_error = ""
    try:
        with torch.no_grad():
            ref = reference(*_clone(inputs))
    except Exception as exc:  # noqa: BLE001 - the reference is undefined here: the family does not apply
        return FamilyResult(
            family, "skipped", f"reference fails on these inputs: {type(exc).__name__}: {exc}"[:300]
        )
    if family != "default" and _all_nan(ref):
        return FamilyResult(family, "skipped", "reference output is all NaN on these inputs")
    if cand_error:
        return FamilyResult(family, "error", cand_error)
    cmp = compare(ref, out, atol, rtol, family)
    return FamilyResult(
        family, "pass" if cmp.ok else "fail", cmp.reason, cmp.max_abs_err, cmp.max_rel_err, cmp.index
    )


def run_families(
    reference,
    candidate,
    problem,
    seed: int,
    atol: float,
    rtol: float,
    families: Iterable[str] = DEFAULT_FAMILIES,
    *,
    device=None,
) -> list[FamilyResult]:
    module = load_problem(problem)
    return [
        run_family(f, reference, candidate, problem, seed, atol, rtol, device=device, module=module)
        for f in families
    ]
