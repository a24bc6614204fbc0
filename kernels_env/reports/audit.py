"""Degenerate-task audit (catalogue #12): problems a constant, zeros or an input-blind answer would pass.

    python -m kernels_env audit --problems DIR [--tolerance 1e-4 --tolerance 1e-2] [--seeds 3] [--json]
        [--out FILE.jsonl [--no-resume]] [--max-input-gb G]

``--max-input-gb`` defaults to a third of the free memory of the device it runs on (``input_budget``: the
GPU's free memory, the host's available memory on a CPU), so an H200 audits every KernelBench problem and a
small host skips what it cannot hold instead of being killed; an explicit value overrides it.

For each problem the reference runs on several input seeds (and, for problems with weights, two weight seeds).
Statistics are streamed in float64 chunks (``_Spread``, ``_close``): one input set and two outputs are alive
at a time, in the problem's dtype, so today's KernelBench sizes fit. A problem that fails (its error, an
out-of-memory) is reported as ``error`` and the run goes on; with ``--out`` each report is appended to a JSONL
file as it finishes and a rerun skips the problems already there.
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
from pathlib import Path
from typing import Any

import torch

from ..guard._outputs import constant_output_violation, tensors
from ..judge.check.inputs import make_inputs, problem_module
from ..judge.check.memory import free_bytes, release
from ..rules.results_file import append_line, read_results

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


CHUNK = 1 << 24  # elements per step: statistics never allocate a float64 copy of a whole output


def _chunks(t: torch.Tensor):
    """Flat float64 chunks of one output (complex: real and imaginary parts)."""
    flat = (torch.view_as_real(t) if t.is_complex() else t).detach().reshape(-1)
    for start in range(0, flat.numel(), CHUNK):
        yield flat[start : start + CHUNK].to(torch.float64)


class _Spread:
    """What the flags need from every output element of every seed, streamed in chunks: the finite range,
    whether all are NaN / all finite, and per tolerance the interval of constants ``c`` that pass
    ``allclose(c, out)`` at every element: ``|c - x| <= tol + tol * |x|`` for all x, i.e.
    ``max(x - tol(1 + |x|)) <= c <= min(x + tol(1 + |x|))`` (zeros pass when 0 is in it)."""

    def __init__(self, tolerances: Sequence[float]):
        self.lo, self.hi = math.inf, -math.inf
        self.all_nan, self.all_finite = True, True
        self.bounds = {tol: [-math.inf, math.inf] for tol in tolerances}

    def add(self, outputs: Sequence[torch.Tensor]) -> None:
        for t in outputs:
            for x in _chunks(t):
                finite = torch.isfinite(x)
                self.all_nan = self.all_nan and bool(torch.isnan(x).all())
                if not bool(finite.all()):
                    self.all_finite = False
                    x = x[finite]
                if not x.numel():
                    continue
                self.lo, self.hi = min(self.lo, float(x.min())), max(self.hi, float(x.max()))
                for tol, b in self.bounds.items():
                    slack = x.abs().mul_(tol).add_(tol)
                    b[0], b[1] = max(b[0], float((x - slack).max())), min(b[1], float((x + slack).min()))

    def passes(self, c: float, tol: float) -> bool:
        lo, hi = self.bounds[tol]
        return self.all_finite and self.lo <= self.hi and lo <= c <= hi

    def stats(self) -> tuple[float, float]:
        return (self.lo, self.hi) if self.lo <= self.hi else (math.nan, math.nan)


def _close(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], tolerances: Sequence[float]) -> dict:
    """Per tolerance: ``allclose(a, b)`` of every output (NaN equal to NaN), in float64 chunks."""
    ok = {tol: len(a) == len(b) and all(x.shape == y.shape for x, y in zip(a, b)) for tol in tolerances}
    if not any(ok.values()):
        return ok
    for x, y in zip(a, b):
        for cx, cy in zip(_chunks(x), _chunks(y)):
            for tol in tolerances:
                ok[tol] = ok[tol] and _allclose(cx, cy, atol=tol, rtol=tol, equal_nan=True)
    return ok


def _input_bytes(module) -> int:
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        values = module.get_inputs()
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _build(module, weight_seed: int, device, eval_mode: bool):
    """The reference model, its weights drawn on ``device`` (far faster for large models on a GPU) unless the
    model cannot be built there."""
    torch.manual_seed(weight_seed)
    try:
        with torch.device(device):
            model = module.Model(*module.get_init_inputs())
    except Exception:  # noqa: BLE001 - a model that needs its constructor on the host
        torch.manual_seed(weight_seed)
        model = module.Model(*module.get_init_inputs())
    model = model.to(device)
    return model.eval() if eval_mode else model


def _run(model, inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        return tensors(model(*inputs))


def audit_problem(
    problem: Any,
    tolerances: Iterable[float] = DEFAULT_TOLERANCES,
    seeds: int = 3,
    device: str = "cpu",
    eval_mode: bool = False,
    max_input_bytes: int = 1 << 30,
    name: str | None = None,
) -> AuditReport:
    """One problem's flags (see the module doc); never raises: a problem that cannot be audited (an error,
    out of memory) is ``status: error`` with the reason. Keeps one input set and two outputs at a time."""
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
        observed = _observe(problem, module, tolerances, max(1, seeds), device, eval_mode)
    except Exception as exc:  # noqa: BLE001 - one broken (or too large) problem must not stop the audit
        report.status = "error"
        report.flags.append(Flag("error", f"{type(exc).__name__}: {str(exc)[:300]}"))
        return report
    _flag(report, tolerances, *observed)
    return report


def _observe(problem, module, tolerances, seeds: int, device, eval_mode: bool):
    """Run the reference on ``seeds`` input sets and on other weights; stream what the flags need."""
    model = _build(module, 42, device, eval_mode)
    spread = _Spread(tolerances)
    blind = {tol: seeds > 1 for tol in tolerances}  # insensitive to inputs so far
    first = None
    for s in range(seeds):
        out = _run(model, make_inputs(problem, 1000 + s, "random", device=device))
        spread.add(out)
        if first is None:
            first = out
        else:
            same = _close(first, out, tolerances)
            blind = {tol: blind[tol] and same[tol] for tol in tolerances}
        del out
    has_weights = any(p.is_floating_point() for p in list(model.parameters()) + list(model.buffers()))
    del model
    weight_blind = None
    if has_weights:
        inputs = make_inputs(problem, 1000, "random", device=device)  # the first seed's again
        other = _run(_build(module, 43, device, eval_mode), inputs)
        weight_blind = _close(other, first, tolerances)
    return spread, blind, weight_blind, len(first), has_weights


def _flag(report: AuditReport, tolerances, spread: _Spread, blind, weight_blind, outputs: int, has_weights):
    lo, hi = spread.stats()
    report.stats.update({"min": lo, "max": hi, "outputs": outputs, "has_weights": has_weights})
    if spread.all_nan:
        report.flags.append(Flag("nan_output", "the reference returns all-NaN"))
    elif lo == hi:
        report.flags.append(Flag("constant", f"every output element is {lo:g} for every input"))
    mid = (lo + hi) / 2 if not math.isnan(lo) else 0.0
    for tol in tolerances:
        if lo != hi and not math.isnan(lo) and (hi - lo) / 2 <= tol * (1 + abs(mid)):
            report.flags.append(Flag("nearly_constant", f"outputs span [{lo:.3g}, {hi:.3g}]", tol))
        if spread.passes(0.0, tol):
            report.flags.append(Flag("zeros_pass", "an all-zeros output passes allclose on every seed", tol))
        elif spread.passes(mid, tol):
            report.flags.append(
                Flag("constant_pass", f"the constant {mid:.4g} passes allclose on every seed", tol)
            )
        if blind[tol]:
            report.flags.append(
                Flag("insensitive_to_inputs", "outputs for different inputs are allclose", tol)
            )
        if weight_blind is not None and weight_blind[tol]:
            report.flags.append(
                Flag("insensitive_to_weights", "outputs for different weights are allclose", tol)
            )
    report.status = "flagged" if report.flags else "ok"


def _problem_files(root: str) -> list[str]:
    if os.path.isfile(root):
        return [root]
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):  # a folder of linked levels too
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
        found.extend(
            os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py") and not f.startswith("_")
        )
    return found


INPUT_SHARE = 3  # one input set and two outputs alive at a time (outputs about as large as the inputs)


def input_budget(device: str) -> int:
    """The default ``--max-input-gb`` in bytes: a third of the device's free memory (see the module doc)."""
    free, _, _ = free_bytes(torch.device(device), None)
    return free // INPUT_SHARE


def run(args: argparse.Namespace) -> int:
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if getattr(args, "max_input_gb", None) is None:
        args.max_input_gb = input_budget(device) / 2**30
    files = _problem_files(args.problems)
    if not files:
        print(f"no problem files under {args.problems}", file=sys.stderr)
        return 2
    tolerances = args.tolerance or list(DEFAULT_TOLERANCES)
    names = {f: os.path.relpath(f, args.problems) if os.path.isdir(args.problems) else f for f in files}
    out = Path(args.out) if getattr(args, "out", None) else None
    done = read_results(out, key="problem") if out is not None and args.resume and out.exists() else {}
    if out is not None and not args.resume:
        out.unlink(missing_ok=True)
    reports = _audit_all(args, files, names, done, tolerances, device, out)
    _print(reports, tolerances, device, args.json)
    return 0


def _audit_all(args, files, names, done, tolerances, device, out: Path | None) -> list[AuditReport]:
    """Audit each problem not already in ``out`` and append its report there as soon as it is done (flushed
    and fsynced: an interrupted run resumes with ``--resume``); a problem's failure never ends the run."""
    from tqdm.auto import tqdm

    reports = [_from_dict(done[names[f]]) for f in files if names[f] in done]
    todo = [f for f in files if names[f] not in done]
    sink = open(out, "a") if out is not None else None  # noqa: SIM115 - held open across the whole run
    try:
        bar = tqdm(todo, unit="problem", file=sys.stderr, disable=args.no_progress, mininterval=2.0)
        for f in bar:
            bar.set_postfix_str(names[f][-40:])
            report = audit_problem(
                f, tolerances, args.seeds, device, args.eval, int(args.max_input_gb * 2**30), name=names[f]
            )
            release(torch.device(device))  # the next problem starts with the device's memory free
            reports.append(report)
            if sink is not None:
                append_line(sink, report.to_dict())
    finally:
        if sink is not None:
            sink.close()
    order = {names[f]: i for i, f in enumerate(files)}
    return sorted(reports, key=lambda r: order.get(r.problem, len(order)))


def _from_dict(d: dict) -> AuditReport:
    flags = [Flag(**f) for f in d.get("flags", [])]
    return AuditReport(d["problem"], d.get("status", "ok"), flags, d.get("stats", {}))


def _print(reports: list[AuditReport], tolerances, device: str, as_json: bool) -> None:
    if as_json:
        doc = {"tolerances": tolerances, "device": device, "problems": [r.to_dict() for r in reports]}
        print(json.dumps(doc, indent=1, default=str))
        return
    for r in reports:
        flags = "; ".join(
            f"{f.kind}" + (f"@{f.tolerance:g}" if f.tolerance is not None else "") + f" ({f.reason})"
            for f in r.flags
        )
        print(f"{r.status:8s} {r.problem}" + (f": {flags}" if flags else ""))
    counts = {s: sum(r.status == s for r in reports) for s in ("ok", "flagged", "error", "skipped")}
    print(f"{len(reports)} problems: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
