"""The final verdict, assembled on the caller's side from what the stages reported: status, speedups over
each baseline, the speed review, the reward; and the verdicts of stages whose worker died, hung or forged.

The stages' reports come from processes that ran candidate code, so nothing here trusts their shape: a
status outside what a stage may report is a forgery (``forged``).
"""

from __future__ import annotations

from typing import Any

from ..rules.result import COMPILE_ERROR, NOT_RUN, REJECTED, RUNTIME_ERROR, TIMEOUT, message, new_result
from ..rules.rewards import get_reward

MIN_CANDIDATE_MS = 1e-4  # floor for speedups: a measured 0 never divides
# What a compile stage may report (its child runs candidate code and writes the report: the rest is forged).
COMPILE_STATUSES = ("ok", COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, REJECTED)
PROTOCOL_FORGERY = "protocol_forgery"
SPEEDUP_REVIEW_THRESHOLD = 10.0  # speedups beyond this are flagged for review in the result (catalogue #16)


def not_run(compile_report: dict[str, Any]) -> dict[str, Any]:
    """CPU mode: a CUDA solution that compiled but cannot run here (no correctness verdict, no reward)."""
    return {
        "status": NOT_RUN,
        "stage": "compile",
        "guard_enforced": compile_report.get("guard_enforced", False),
        "backends": compile_report.get("backends", []),
        "messages": [
            message(
                "note",
                "CPU mode: the solution's CUDA code compiled; it needs a "
                "GPU to run, so it has no correctness verdict and no reward",
            )
        ],
    }


def verdict(
    report: dict[str, Any],
    settings: dict[str, Any],
    names: dict[str, str],
    request_id: str,
    environment: dict[str, Any],
) -> dict[str, Any]:
    """The result schema (``rules.result``) filled from a stage's report; timings and reward added later."""
    result = new_result(
        status=report["status"],
        stage=report.get("stage", "compile"),
        problem=names["problem"],
        solution=names["solution"],
        request_id=request_id,
        error=report.get("error"),
        messages=report.get("messages"),
        check=report.get("check"),
        evidence=report.get("evidence"),
    )
    result["backends"] = report.get("backends", [])
    result["correctness"] = report.get("correctness")
    result["environment"] = environment
    result["judge"] = {
        **settings,
        "guard_enforced": bool(report.get("guard_enforced", False)),
        "memory_plan": report.get("memory_plan"),  # the run stage's (kernels_env.judge.memory); None before
    }
    return result


def add_timings(result: dict[str, Any], candidate: dict[str, Any], base: dict[str, Any]) -> None:
    """Candidate and baseline timings, speedups and the speed review into ``result``."""
    result["timings"] = {
        "comparable": base["comparable"],
        "unit": "ms",
        "candidate": candidate,
        "baselines": base["baselines"],
    }
    result["speedups"] = speedups(candidate, base["baselines"], base["comparable"])
    result["timings"]["review"], notes = speed_review(result["speedups"], candidate)
    result["messages"].extend(notes)


def add_reward(result: dict[str, Any], reward: str) -> None:
    result["reward_fn"] = reward
    result["reward"] = get_reward(reward)(result["status"], result["speedups"])


def speed_review(speedups: dict[str, float | None], candidate: dict) -> tuple[dict[str, Any], list[dict]]:
    """Speedups beyond ``SPEEDUP_REVIEW_THRESHOLD`` are legal but flagged for review (catalogue #16: one
    absurd entry must not carry a geomean); the roofline floor the worker checked is reported next to them."""
    flagged = sorted(m for m, x in speedups.items() if x is not None and x > SPEEDUP_REVIEW_THRESHOLD)
    review = {
        "speedup_threshold": SPEEDUP_REVIEW_THRESHOLD,
        "flagged": flagged,
        "roofline_floor_ms": candidate.get("roofline_floor_ms"),
    }
    notes = [
        message(
            "note",
            f"speedup over {m} is {speedups[m]:.1f}x (> {SPEEDUP_REVIEW_THRESHOLD:g}x): flagged for review",
            baseline=m,
            speedup=speedups[m],
        )
        for m in flagged
    ]
    return review, notes


def speedups(candidate: dict, baselines: dict[str, dict], comparable: bool) -> dict[str, float | None]:
    """t_baseline / t_candidate per baseline mode (medians); None when not comparable or not measured."""
    out: dict[str, float | None] = {}
    for mode, base in baselines.items():
        t0 = base.get("median_ms")
        out[mode] = t0 / max(candidate["median_ms"], MIN_CANDIDATE_MS) if comparable and t0 else None
    return out


def forged(stage: str, error: str, evidence: dict | None = None) -> dict[str, Any]:
    return {
        "status": REJECTED,
        "stage": stage,
        "error": f"policy check {PROTOCOL_FORGERY!r} failed: {error}",
        "check": PROTOCOL_FORGERY,
        "evidence": evidence or {"what": error},
        "messages": [],
        "guard_enforced": True,
    }


def worker_failure(exc: Any, stage: str) -> dict[str, Any]:
    """The verdict when a worker died, hung or misbehaved (every stage runs candidates under the guard).

    ``exc`` is the supervisor's ``WorkerFailure`` (``kind``, ``detail``, ``evidence``, ``log_tail``)."""
    tail = [message("log", exc.log_tail)] if exc.log_tail else []
    if exc.kind == "forgery":  # candidate code wrote to the protocol channel
        return {**forged(stage, exc.detail, exc.evidence), "messages": tail}
    if exc.kind == "timeout":
        return {
            "status": TIMEOUT,
            "stage": stage,
            "error": f"{stage} stage {exc.detail} (worker killed)",
            "messages": tail,
            "guard_enforced": True,
        }
    return {
        "status": RUNTIME_ERROR,
        "stage": stage,
        "error": f"{exc.detail} (during {stage})",
        "messages": tail,
        "guard_enforced": True,
    }
