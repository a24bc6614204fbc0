"""The final verdict, assembled on the caller's side from what the stages reported: status, speedups over
each baseline, the speed review, the reward; and the verdicts of stages whose worker died, hung or forged.

The stages' reports come from processes that ran candidate code, so nothing here trusts their shape: a
status outside what a stage may report is a forgery (``forged``), and every field is coerced to the schema's
type (``verdict`` never raises: tests/sandbox/test_compare_fuzz.py). What is not the candidate's doing has its
own statuses without a reward: ``judge_error`` (the judge failed: its traceback) and ``reference_error``
(the reference cannot be loaded, run or timed: what is wrong with it).
"""

from __future__ import annotations

import math
from typing import Any

from ...rules.result import (
    COMPILE_ERROR,
    JUDGE_ERROR,
    JUDGE_STATUSES,
    NOT_RUN,
    REFERENCE_ERROR,
    REJECTED,
    RUNTIME_ERROR,
    STAGES,
    TIMEOUT,
    TOOLCHAIN_MISSING,
    message,
    new_result,
)
from ...rules.rewards import get_reward
from ..build import toolchains

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


BUILD_PATHS = ("fast", "plain", "plain-after-fast")  # kernels_env.judge.build.fast_build
HEADER_PATHS = ("as-written", "lean", "as-written-after-lean")  # kernels_env.judge.build.lean_headers


def build_records(report: Any, limit: int = 16) -> list[dict[str, Any]]:
    """The compile stage's extension builds for ``durations_s["builds"]``: builder, name, which build path
    built it (``fast``, ``plain``, ``plain-after-fast``), which CUDA source (``headers``: ``lean``,
    ``as-written``, ``as-written-after-lean``), whether with the shared PCH, whether it succeeded, wall
    seconds. Coerced: the compile child that wrote them ran candidate code."""
    builds = report.get("builds") if isinstance(report, dict) else None
    out = []
    for b in builds[:limit] if isinstance(builds, list) else []:
        if not isinstance(b, dict):
            continue
        seconds = b.get("s")
        out.append({
            "builder": _text(b.get("builder"), 40),
            "name": _text(b.get("name"), 200),
            "path": b.get("path") if b.get("path") in BUILD_PATHS else "plain",
            "headers": b.get("headers") if b.get("headers") in HEADER_PATHS else "as-written",
            "use_pch": b.get("use_pch") is True,
            "ok": b.get("ok") is True,
            "s": float(seconds) if isinstance(seconds, int | float) and math.isfinite(seconds) else None,
        })  # fmt: skip
    return out


def judge_error(stage: str, error: str, trace: str = "") -> dict[str, Any]:
    """A report for the judge's own failure (an exception, a malformed reply): no reward, its traceback."""
    return {
        "status": JUDGE_ERROR,
        "stage": stage,
        "error": f"the judge failed (not the candidate's fault): {error}",
        "messages": [message("traceback", trace, origin="judge")] if trace else [],
    }


def reference_error(stage: str, error: str) -> dict[str, Any]:
    """A report for a reference that cannot be loaded, run or timed: no reward, what is wrong with it."""
    return {
        "status": REFERENCE_ERROR,
        "stage": stage,
        "error": error if error.startswith("reference") else f"reference: {error}",
        "messages": [message("note", "the reference is broken, not the candidate: no verdict and no reward")],
    }


def toolchain_missing(lacking: Any, backends: Any) -> dict[str, Any]:
    """A report for a solution whose backend's toolchain this machine lacks (``judge.build.toolchains``): no
    reward, the packages named. Coerced: built from the compile worker's report."""
    items = [
        {k: _text(m.get(k), 200) for k in ("backend", "package", "what")}
        for m in (lacking if isinstance(lacking, list) else [])
        if isinstance(m, dict)
    ]
    note = (
        "this machine lacks the solution's toolchain, not the candidate's failure: no verdict and no reward"
    )
    return {
        "status": TOOLCHAIN_MISSING,
        "stage": "compile",
        "error": toolchains.error_line(items) if items else "needs a toolchain that is not installed here",
        "messages": [message("note", note)],
        "backends": [_text(b) for b in backends] if isinstance(backends, list) else [],
        "evidence": {"toolchains": items},
    }


def verdict(
    report: dict[str, Any],
    settings: dict[str, Any],
    names: dict[str, str],
    request_id: str,
    environment: dict[str, Any],
) -> dict[str, Any]:
    """The result schema (``rules.result``) filled from a stage's report; timings and reward added later.
    Fields of the wrong type are coerced (a report is never trusted); a status the judge does not give (one
    made outside it, ``no_solution`` or ``infra_error``, included) is a judge error."""
    if not isinstance(report, dict):
        report = judge_error("compile", f"a stage reported {_text(report)}")
    if report.get("status") not in JUDGE_STATUSES:
        status = _text(report.get("status"))
        report = judge_error(_stage(report.get("stage")), f"a stage reported status {status}")
    result = new_result(
        status=report["status"],
        stage=_stage(report.get("stage")),
        problem=str(names.get("problem", "")),
        solution=str(names.get("solution", "")),
        request_id=request_id,
        error=None if report.get("error") is None else _text(report["error"]),
        messages=_messages(report.get("messages")),
        check=_check(report),
        evidence=report.get("evidence"),
    )
    backends = report.get("backends")
    result["backends"] = [_text(b) for b in backends] if isinstance(backends, list) else []
    correctness = report.get("correctness")
    result["correctness"] = correctness if isinstance(correctness, dict) else None
    result["environment"] = environment if isinstance(environment, dict) else {}
    plan = report.get("memory_plan")  # the run stage's (kernels_env.judge.check.memory); None before it
    result["judge"] = {
        **settings,
        "guard_enforced": bool(report.get("guard_enforced", False)),
        "memory_plan": plan if isinstance(plan, dict) else None,
    }
    if isinstance(report.get("memory_estimate"), dict):  # insufficient_memory: what the judge estimated
        result["judge"]["memory_estimate"] = report["memory_estimate"]
    return result


def _text(value: Any, limit: int = 4000) -> str:
    """A field as text: strings as they are, anything else by its repr (cut at ``limit``)."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check(report: dict[str, Any]) -> str | None:
    """The failed check's name; a rejection that names none is still a rejection (the failure reward: the
    compile child's word may be a candidate's), of the ``unnamed`` check."""
    check = report.get("check")
    if report["status"] == REJECTED and not check:
        return "unnamed"
    return None if check is None else _text(check)


def _stage(value: Any) -> str:
    return value if isinstance(value, str) and value in STAGES else "compile"


def _messages(value: Any) -> list[dict[str, Any]]:
    """Messages as the schema has them (dicts with a str ``kind``); anything else kept as a log line."""
    if not isinstance(value, list):
        return [] if value is None else [message("log", _text(value))]
    out = []
    for m in value:
        ok = isinstance(m, dict) and isinstance(m.get("kind"), str) and isinstance(m.get("text", ""), str)
        out.append(m if ok else message("log", _text(m)))
    return out


def add_timings(result: dict[str, Any], candidate: dict[str, Any], base: dict[str, Any]) -> None:
    """Candidate and baseline timings, speedups and the speed review into ``result``."""
    candidate = candidate if isinstance(candidate, dict) else {}
    baselines = base.get("baselines") if isinstance(base.get("baselines"), dict) else {}
    comparable = base.get("comparable") is True
    result["timings"] = {
        "comparable": comparable,
        "unit": "ms",
        "candidate": candidate,
        "baselines": baselines,
    }
    result["speedups"] = speedups(candidate, baselines, comparable)
    result["timings"]["review"], notes = speed_review(result["speedups"], candidate)
    result["messages"].extend(notes)


def note_shared_device(result: dict[str, Any], settings: dict[str, Any]) -> None:
    """Timings taken while other run workers shared the device (``run_workers_per_gpu`` > 1) without the GPU
    lock (``exclusive_timing`` off) are disturbed: candidate and baselines alike, by how busy the others
    were. The verdict says so; its speedups stand as measured, but no timing comparison should rest on them.
    Under the lock every measurement held the device alone: nothing to say."""
    shared = settings.get("device_shared_by", 1)
    if not isinstance(shared, int) or shared <= 1 or not result.get("timings"):
        return
    if settings.get("timing_lock") is True:
        return
    result["timings"]["device_shared_by"] = shared
    device = "GPU" if settings.get("device") == "cuda" else "CPU"
    text = (
        f"timed while {shared} run workers shared the {device} without the GPU lock "
        f"(run_workers_per_gpu={shared}): timings and speedups are disturbed; compare speeds only with "
        "run_workers_per_gpu=1 or under the lock (exclusive_timing, on a GPU)"
    )
    result["messages"].append(message("note", text, device_shared_by=shared))


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
    t = _ms(candidate.get("median_ms"))
    for mode, base in baselines.items():
        t0 = _ms(base.get("median_ms")) if isinstance(base, dict) else None
        out[str(mode)] = t0 / max(t, MIN_CANDIDATE_MS) if comparable and t0 and t is not None else None
    return out


def _ms(value: Any) -> float | None:
    """A measured time: a finite non-negative number, else unknown (None)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int beyond any float is no time either
        return None
    return value if math.isfinite(value) and value >= 0 else None


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
    plan = exc.evidence.get("memory_plan") if exc.kind == "memory" else None
    if judges_memory(exc):  # killed at the host-memory limit while the judge's code ran (judge.check.memory)
        report = judge_error(stage, f"{exc.detail} (during {stage})")
        note = message("note", "not the candidate's failure: no reward; see judge.memory_plan")
        return {**report, "messages": [note, *tail], "memory_plan": plan}
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
        "memory_plan": plan,
    }


def judges_memory(exc: Any) -> bool:
    """A worker killed at its host-memory limit while the judge's (or the reference's) code ran."""
    return exc.kind == "memory" and isinstance(exc.evidence, dict) and exc.evidence.get("owner") == "judge"
