"""Degenerate-task audit (catalogue #12): problems a constant, zeros or an input-blind answer would pass.

    python -m kernels_env audit --problems DIR [--tolerance 1e-4 --tolerance 1e-2] [--seeds 3] [--json]

For each problem the reference runs on several input seeds (and, for problems with weights, two weight seeds).
Flags, each with its reason and the tolerance at which it holds:
- ``constant``: every output element equal, for every input;
- ``nearly_constant``: the output's spread is within the tolerance;
- ``zeros_pass``: an all-zeros output passes ``allclose`` against the reference on every seed;
- ``constant_pass``: the best single constant (mid-range) passes on every seed;
- ``insensitive_to_inputs``: outputs for different inputs are allclose (a cached answer would pass);
- ``insensitive_to_weights``: outputs for different weights are allclose;
- ``nan_output``: the reference returns all-NaN; ``error``/``skipped``: it could not be audited.

``constant_output_violation`` (re-exported from the guard) rejects a candidate whose output is constant where
the reference's is not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ..guard._outputs import constant_output_violation, tensors
from ..judge.inputs import make_inputs, problem_module

__all__ = ["AuditReport", "Flag", "audit_problem", "constant_output_violation", "run"]

DEFAULT_TOLERANCES = (1e-4, 1e-2)
_allclose = torch.allclose  # captured before any candidate code runs


@dataclass
class Flag:
    kind: str
    reason: str
    tolerance: float | None = None


@dataclass
class AuditReport:
    problem: str
    status: str = "ok"  # ok | flagged | error | skipped
    flags: list[Flag] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _as64(ts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    # Stays on the device: a host copy of every output dominated the audit of large tasks.
    return [(torch.view_as_real(t) if t.is_complex() else t).detach().to(torch.float64) for t in ts]


def _close(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], tol: float) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and _allclose(x, y, atol=tol, rtol=tol, equal_nan=True) for x, y in zip(a, b)
    )


def _spread(ts: Sequence[torch.Tensor]) -> tuple[float, float, float]:
    """(min, max, max |value|) over the finite elements of all outputs."""
    finite = [t[torch.isfinite(t)] for t in ts]
    finite = [f for f in finite if f.numel()]
    if not finite:
        return math.nan, math.nan, math.nan
    lo = min(float(f.min()) for f in finite)
    hi = max(float(f.max()) for f in finite)
    return lo, hi, max(abs(lo), abs(hi))


def _input_bytes(module) -> int:
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        values = module.get_inputs()
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _build(module, weight_seed: int, device, eval_mode: bool):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(weight_seed)
        model = module.Model(*module.get_init_inputs())
    model = model.to(device)
    return model.eval() if eval_mode else model


def _run(model, inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        return _as64(tensors(model(*inputs)))


def audit_problem(
    problem: Any,
    tolerances: Iterable[float] = DEFAULT_TOLERANCES,
    seeds: int = 3,
    device: str = "cpu",
    eval_mode: bool = False,
    max_input_bytes: int = 1 << 30,
    name: str | None = None,
) -> AuditReport:
    if name is None:
        is_path = isinstance(problem, (str, os.PathLike)) and os.path.exists(problem)
        name = os.path.basename(os.fspath(problem)) if is_path else str(getattr(problem, "name", "problem"))
    report = AuditReport(name)
    tolerances = sorted(set(tolerances))
    try:
        module = problem_module(problem)
        for attr in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(module, attr):
                raise ValueError(f"the problem has no {attr} (KernelBench format)")
        size = _input_bytes(module)
        report.stats["input_bytes"] = size
        if size > max_input_bytes:
            report.status = "skipped"
            report.flags.append(
                Flag("skipped", f"inputs need {size / 2**30:.2f} GiB > {max_input_bytes / 2**30:.2f}")
            )
            return report
        model = _build(module, 42, device, eval_mode)
        inputs = [make_inputs(problem, 1000 + s, "random", device=device) for s in range(seeds)]
        outs = [_run(model, x) for x in inputs]
        has_weights = any(p.is_floating_point() for p in list(model.parameters()) + list(model.buffers()))
        other = _run(_build(module, 43, device, eval_mode), inputs[0]) if has_weights else None
    except Exception as exc:  # noqa: BLE001 - one broken problem must not stop the audit
        report.status = "error"
        report.flags.append(Flag("error", f"{type(exc).__name__}: {str(exc)[:300]}"))
        return report
    lo, hi, peak = _spread([t for o in outs for t in o])
    report.stats.update({"min": lo, "max": hi, "outputs": len(outs[0]), "has_weights": has_weights})
    if all(all(bool(torch.isnan(t).all()) for t in o) for o in outs):
        report.flags.append(Flag("nan_output", "the reference returns all-NaN"))
    elif lo == hi:
        report.flags.append(Flag("constant", f"every output element is {lo:g} for every input"))
    mid = (lo + hi) / 2 if not math.isnan(lo) else 0.0
    for tol in tolerances:
        if lo != hi and not math.isnan(lo) and (hi - lo) / 2 <= tol * (1 + abs(mid)):
            report.flags.append(Flag("nearly_constant", f"outputs span [{lo:.3g}, {hi:.3g}]", tol))
        if all(_close([torch.zeros_like(t) for t in o], o, tol) for o in outs):
            report.flags.append(Flag("zeros_pass", "an all-zeros output passes allclose on every seed", tol))
        elif all(_close([torch.full_like(t, mid) for t in o], o, tol) for o in outs):
            report.flags.append(
                Flag("constant_pass", f"the constant {mid:.4g} passes allclose on every seed", tol)
            )
        if len(outs) > 1 and all(_close(outs[0], o, tol) for o in outs[1:]):
            report.flags.append(
                Flag("insensitive_to_inputs", "outputs for different inputs are allclose", tol)
            )
        if other is not None and _close(other, outs[0], tol):
            report.flags.append(
                Flag("insensitive_to_weights", "outputs for different weights are allclose", tol)
            )
    report.status = "flagged" if report.flags else "ok"
    return report


def _problem_files(root: str) -> list[str]:
    if os.path.isfile(root):
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
        found.extend(
            os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py") and not f.startswith("_")
        )
    return found


def run(args: argparse.Namespace) -> int:
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    files = _problem_files(args.problems)
    if not files:
        print(f"no problem files under {args.problems}", file=sys.stderr)
        return 2
    tolerances = args.tolerance or list(DEFAULT_TOLERANCES)
    reports = [
        audit_problem(
            f,
            tolerances,
            args.seeds,
            device,
            args.eval,
            int(args.max_input_gb * 2**30),
            name=os.path.relpath(f, args.problems) if os.path.isdir(args.problems) else f,
        )
        for f in files
    ]
    if args.json:
        print(
            json.dumps(
                {"tolerances": tolerances, "device": device, "problems": [r.to_dict() for r in reports]},
                indent=1,
                default=str,
            )
        )
        return 0
    for r in reports:
        flags = "; ".join(
            f"{f.kind}" + (f"@{f.tolerance:g}" if f.tolerance is not None else "") + f" ({f.reason})"
            for f in r.flags
        )
        print(f"{r.status:8s} {r.problem}" + (f": {flags}" if flags else ""))
    counts = {s: sum(r.status == s for r in reports) for s in ("ok", "flagged", "error", "skipped")}
    print(f"{len(reports)} problems: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    return 0
