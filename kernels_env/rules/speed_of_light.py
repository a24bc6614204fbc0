"""Speed of light (issue 31): how close a candidate came to the roofline floor of its task on this GPU.

The floor is ``python -m kernels_env roofline``'s (``kernels_env.tools._roofline.floor``): the larger of the
task's FLOPs at the device's matmul/FP32 peak and its compulsory bytes at its DRAM bandwidth (measured once
per GPU and cached, else the spec sheet). The achieved fraction is ``floor time / candidate time``: 1.0 is
the speed of light; a memory-bound kernel at 80% of DRAM bandwidth reads 0.8. It can exceed 1 only where
the floor is an estimate an algebraic shortcut beats (the roofline tool says so), or the timing is a hack
(``below_roofline`` rejects times under the judge's own, looser floor first).

Each timed verdict records ``timings.speed_of_light`` = ``{"floor_ms", "bound", "ceilings", "fraction"}``,
or ``{"fraction": None, "reason": ...}`` where no floor applies (CPU mode: no GPU roofline, the timings are
not comparable). Summaries report the median and geomean fraction over correct solutions that have one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

CPU_REASON = "CPU mode: no GPU roofline (timings are not comparable)"


def fraction(floor_ms: float | None, candidate_ms: float | None) -> float | None:
    """floor / measured time; None when either is unknown or not a positive finite number."""
    return float(floor_ms) / float(candidate_ms) if _positive(floor_ms) and _positive(candidate_ms) else None


def _positive(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def record(roofline: Mapping[str, Any] | None, candidate_ms: float | None, device: str | None,
           reason: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The verdict's ``timings.speed_of_light`` from the roofline tool's result (``floor``, ``ceilings``)."""
    if device != "cuda":
        return {"fraction": None, "reason": CPU_REASON}
    floor = (roofline or {}).get("floor") or {}
    floor_us = floor.get("floor_us")
    if not floor_us:
        return {"fraction": None, "reason": reason or (roofline or {}).get("note") or "no roofline floor"}
    floor_ms = floor_us / 1e3
    ceilings = (roofline or {}).get("ceilings") or {}
    return {
        "floor_ms": floor_ms,
        "bound": floor.get("bound"),
        "ceilings": ceilings.get("source"),
        "fraction": fraction(floor_ms, candidate_ms),
    }


def of(result: Mapping[str, Any]) -> float | None:
    """The achieved fraction a verdict recorded (None: not timed, CPU mode, no floor)."""
    x = ((result.get("timings") or {}).get("speed_of_light") or {}).get("fraction")
    return float(x) if _positive(x) else None


def summarize(results: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Median and geomean fraction over the correct results with one; why not, when none has one."""
    correct = [r for r in results if r.get("status") == "correct"]
    xs = [x for x in (of(r) for r in correct) if x is not None]
    if not xs:
        reasons = {((r.get("timings") or {}).get("speed_of_light") or {}).get("reason") for r in correct}
        reasons.discard(None)
        why = sorted(reasons)[0] if reasons else "no correct solution with a timing and a roofline floor"
        return {"count": 0, "median": None, "geomean": None, "reason": why}
    geomean = math.exp(statistics.fmean(math.log(x) for x in xs))
    return {"count": len(xs), "median": statistics.median(xs), "geomean": geomean, "reason": None}
