"""An adversarial family's tolerance, widened where float32 itself cannot meet it on the family's inputs.

The families (``kernels_env.judge.check.adversarial``) compare a candidate with the float32 reference at the
protocol's tolerance. On some tasks the reference cannot meet that tolerance itself on a family's inputs:
``large`` scales inputs by 1e4, where a float32 value's rounding step is ~1e-3, so a task that multiplies
before a log-softmax or a sine carries ~1e-3 of rounding into an output of magnitude ~1. On the H200 a
fused Triton plan of ``x * sigmoid(gate) -> log_softmax -> softplus -> amax`` (7296 x 4096) was judged
``incorrect`` on ``large`` with max abs error 2.8e-4 against the float32 reference (tolerance 6.9e-5),
while it was *closer* to the float64 answer (1.5e-4) than that reference was (3.0e-4). The unfused plan
and every tile size failed the same way on a few rows each: the judge blamed correct candidates for
float32's conditioning (docs/results/gpu_tests.md).

So, when a candidate fails a family's comparison (and only then: a pass costs nothing extra), the reference
runs again in float64 (a copy of its model with floating parameters and buffers in float64, floating inputs
promoted), and ``E`` = the largest difference between the float32 reference and the float64 one over
positions finite in both. The comparison is repeated with ``atol + 2 * E``: a candidate at most as far from
the float64 answer as the reference is, is at most ``2 * E`` from the reference. NaN and infinity positions
must still match, so a formulation that overflows where the reference does not still fails. The default
trials are never widened (they follow the protocol, as KernelBench does); the family's record carries
``reference_fp32_error`` (E) whenever it was computed.

Where the float64 reference cannot be computed (a reference that mixes in float32 tensors it creates itself,
out of memory, a structure or shape that differs) the family's first verdict stands, and its reason says why.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import torch

from ...guard._outputs import tensors
from .compare import CHUNK

# |got - expected| <= |got - truth| + |truth - expected| <= E + E for a candidate as good as the reference
WIDENING = 2.0


def promote(value: Any) -> Any:
    """Floating tensors (in nested lists, tuples and dicts) as float64 copies; everything else as is."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64) if value.is_floating_point() else value
    if isinstance(value, list | tuple):
        return type(value)(promote(v) for v in value)
    if isinstance(value, dict):
        return {k: promote(v) for k, v in value.items()}
    return value


def float64_model(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of the reference's model with its floating parameters and buffers in float64."""
    return copy.deepcopy(model).to(torch.float64)


def reference_error(expected: Any, exact: Any) -> float:
    """E: max |expected - exact| over floating outputs, at positions finite in both. Raises ValueError when
    the two structures do not pair up (other tensor counts, shapes or devices)."""
    want, truth = tensors(expected), tensors(exact)
    if len(want) != len(truth):
        raise ValueError(f"the float64 reference returned {len(truth)} tensors, the float32 one {len(want)}")
    err = 0.0
    for e, t in zip(want, truth):
        if not e.is_floating_point():
            continue
        if e.shape != t.shape or e.device != t.device:
            raise ValueError(f"the float64 reference's output is {list(t.shape)}, not {list(e.shape)}")
        for start in range(0, e.numel(), CHUNK):  # no output-sized float64 temporaries
            a = e.reshape(-1)[start : start + CHUNK].to(torch.float64)
            b = t.reshape(-1)[start : start + CHUNK].to(torch.float64)
            finite = torch.isfinite(a) & torch.isfinite(b)
            if bool(finite.any()):
                err = max(err, float((a - b).abs()[finite].max()))
    return err


def widened(tolerances: Mapping[str, list[float]], err: float) -> dict[str, list[float]]:
    """The tolerances with ``WIDENING * err`` added to every atol (rtol unchanged)."""
    return {k: [float(a) + WIDENING * err, float(r)] for k, (a, r) in tolerances.items()}


def float64_error(run64: Callable[[], Any], expected: Any) -> tuple[float | None, str]:
    """(E, '') from the float64 reference, or (None, why it could not be computed)."""
    try:
        exact = run64()
        return reference_error(expected, exact), ""
    except Exception as exc:  # noqa: BLE001 - any failure leaves the family's first verdict standing
        return None, f"{type(exc).__name__}: {exc}"[:200]
