"""The race probe: compute-sanitizer racecheck on a correct GPU verdict (catalogue #13, issue 31).

An intra-block shared-memory race (a missing ``__syncthreads``/``__syncwarp`` between a write and another
thread's read) gives the right answer under typical scheduling: the three answers of trial 0 agree, no
element stays poisoned, and the verdict is ``correct``. Only a tool that watches the accesses sees it:
racecheck reports every shared-memory hazard not ordered by a barrier, whatever the scheduling did.

It costs one extra forward under the sanitizer (a process start, the cached build, the instrumented kernels:
seconds to tens of seconds), so by default it runs where a race would be paid most, the top reward tier:
``race_check="top_tier"`` probes a correct candidate that beat every measured baseline by the reward's
margin (``rewards.faster``); ``"always"`` probes every correct GPU verdict; ``"off"`` none. A verdict the
probe ran on records ``race_probe`` (``clean``, hazards, elapsed seconds); a hazard makes it ``rejected``
with check ``shared_memory_race`` and the sanitizer's findings as evidence. Without a GPU or without
compute-sanitizer the probe is ``unavailable`` (a note says so; the verdict stands).

The decisions here are pure functions of the verdict and the sanitize tool's response (tested on a CPU);
the client runs the tool (``kernels_env.client._tools``).
"""

from __future__ import annotations

from typing import Any

from ...rules.result import CORRECT, REJECTED, message
from ...rules.rewards import faster

SHARED_MEMORY_RACE = "shared_memory_race"
TOOL = "racecheck"


def wants_probe(result: dict[str, Any], settings: dict[str, Any]) -> bool:
    """Whether this verdict gets the probe (see module doc)."""
    mode = settings.get("race_check", "top_tier")
    if mode == "off" or settings.get("device") != "cuda" or result.get("status") != CORRECT:
        return False
    if mode == "always":
        return True
    speedups = result.get("speedups") or {}
    return bool(speedups) and all(faster(s) for s in speedups.values())


def apply_probe(result: dict[str, Any], response: dict[str, Any]) -> None:
    """Record the sanitize tool's ``response`` (racecheck only) in ``result``; a hazard rejects it."""
    report = ((response.get("result") or {}).get("tools") or {}).get(TOOL)
    if not response.get("ok") and report is None:
        why = response.get("error") or "the sanitize tool gave no racecheck report"
        result["race_probe"] = {"status": "unavailable", "reason": str(why)[:500]}
        result["messages"].append(message("note", f"race probe not run: {str(why)[:200]}"))
        return
    report = report or {}
    findings = [f for f in report.get("findings") or [] if _is_race(f)]
    probe = {
        "status": "ran",
        "clean": not findings and bool(report.get("completed", True)),
        "hazards": len(findings),
        "elapsed_s": report.get("elapsed_s"),
    }
    result["race_probe"] = probe
    if not findings:
        if not report.get("completed", True):
            result["messages"].append(message("note", "race probe incomplete (timed out): verdict unchanged"))
        return
    first = findings[0]
    where = first.get("file"), first.get("line")
    text = (
        f"racecheck: {len(findings)} shared-memory hazard(s) not ordered by a barrier, first "
        f"{first.get('kind', 'race')} in {first.get('kernel') or '?'} at {where[0]}:{where[1]}: "
        "a race that happened to give the right answer under this scheduling"
    )
    result.update(status=REJECTED, check=SHARED_MEMORY_RACE, stage="race_probe", error=text)
    result["evidence"] = {"message": text, "findings": findings[:5]}


def _is_race(finding: dict[str, Any]) -> bool:
    """A hazard racecheck calls an error (its warnings are accesses it judges benign)."""
    kind = str(finding.get("kind", "")).lower()
    racy = "race" in kind or kind.startswith("potential")
    return racy and str(finding.get("severity", "error")).lower() != "warning"
