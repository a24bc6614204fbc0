"""Each stage's reply, read on the caller's side without trusting it: the compile report screened, the run
worker's reply turned into the report the verdict is assembled from, the baselines' reply, and the seconds
a run worker waited for (and held) its GPU's lock.

The replies come from processes that ran candidate code (or the reference's), so their shape is checked
before anything is read: a reply that is not a dict, a ``harness_error`` (the judge failed in the worker)
and a ``problem_error`` (the reference is broken) each become their own verdict, never the candidate's.
Pure functions over dicts: the client (``kernels_env.client``) talks to the workers and calls these.
"""

from __future__ import annotations

from typing import Any

from ...rules.result import JUDGE_ERROR, RUNTIME_ERROR, message, new_result
from .result import COMPILE_STATUSES, forged, judge_error, toolchain_missing


def screen_compile(report: Any) -> dict[str, Any]:
    """The compile stage's report, what is not the candidate's doing first: a broken reference or the judge's
    own failure (both reported before candidate code ran), then a status it may not report (forged)."""
    if not isinstance(report, dict):
        return judge_error("compile", f"the compile worker replied with a {type(report).__name__}")
    if report.get("problem_error"):
        return {"problem_error": report["problem_error"], "stage": "compile"}
    if report.get("judge_error"):
        return judge_error("compile", str(report["judge_error"]), str(report.get("traceback", "")))
    if report.get("toolchain_missing"):  # said by the compile worker before any candidate code ran
        return toolchain_missing(report["toolchain_missing"], report.get("backends"))
    if report.get("status") not in COMPILE_STATUSES:
        return forged("compile", f"the compile stage reported status {report.get('status')!r}")
    return report


def run_reply(payload: Any, fatal: bool, durations: dict[str, Any], first: str | None) -> dict[str, Any]:
    """The run worker's reply as the report the verdict is built from. ``fatal``: the worker was replaced
    after the request (the candidate tampered with it, or left the device unusable); ``first``: why the first
    attempt was killed when this is the judge's retry with the smaller memory plan. The reply's
    ``phases_s`` and GPU-lock seconds move into ``durations``."""
    if not isinstance(payload, dict):
        return judge_error("load", f"the run worker replied with a {type(payload).__name__}")
    if isinstance(payload.get("phases_s"), dict):
        durations["run_phases"] = payload.pop("phases_s")
    lock_durations(payload.pop("gpu_lock_s", None), durations)
    if payload.get("harness_error"):  # an exception in the worker outside the harness's own handling
        trace = str(payload["harness_error"])
        return judge_error("load", trace.strip().splitlines()[-1][:500], trace)
    if first is not None:
        text = f"the first attempt was killed in the judge's code ({first}): judged with the smaller plan"
        payload.setdefault("messages", []).append(message("note", text))
    if fatal and not payload.get("device_error"):
        payload.setdefault("messages", []).append(
            message("note", "the candidate tampered with the worker process; the worker was replaced")
        )
    elif fatal:
        payload.setdefault("messages", []).append(
            message(
                "note",
                f"the device was left unusable ({payload.get('device_error')}); the worker was replaced",
            )
        )
        if payload.get("status") == "correct":  # an asynchronous fault surfaced only after the verdict
            error = f"device error after the run: {payload['device_error']}"
            payload.update(status=RUNTIME_ERROR, error=error)
    return payload


def retried_failure(report: dict[str, Any], first: str | None) -> dict[str, Any]:
    """A run worker's failure; on the judge's retry, a judge_error says the first attempt failed alike."""
    if first is not None and report["status"] == JUDGE_ERROR:
        report["error"] += f"; the same with the smaller memory plan (first attempt: {first})"
    return report


def baselines_reply(payload: Any, name: str) -> tuple[str, str] | dict[str, Any]:
    """The baselines of reference ``name`` from the run worker's reply (``baselines``, ``comparable``), or
    ``(whose, error)`` when there are none: ``"reference"`` (it is broken) or ``"judge"`` (it failed)."""
    if not isinstance(payload, dict):
        return "judge", f"baselines of {name}: the run worker replied with a {type(payload).__name__}"
    if payload.get("problem_error"):
        return "reference", f"baselines of {name}: {payload['problem_error']}"
    if payload.get("harness_error") or not isinstance(payload.get("baselines"), dict):
        detail = str(payload.get("harness_error") or "a reply without baselines").strip()
        return "judge", f"baselines of {name}: the judge failed: {detail.splitlines()[-1]}"
    return {"baselines": payload["baselines"], "comparable": payload.get("comparable") is True}


def lock_durations(lock: Any, durations: dict[str, Any]) -> None:
    """The run worker's seconds waiting for its GPU's lock and holding it exclusive (shared GPUs under
    exclusive timing only) as ``durations_s.gpu_wait`` / ``gpu_exclusive``, added over attempts."""
    if not isinstance(lock, dict):
        return
    for key, name in (("wait", "gpu_wait"), ("exclusive", "gpu_exclusive")):
        value = lock.get(key)
        if isinstance(value, int | float):
            durations[name] = round(durations.get(name, 0.0) + float(value), 4)


def fallback(
    report: dict[str, Any], settings: dict[str, Any], names: dict[str, str], rid: str, environment: Any
) -> dict[str, Any]:
    """The judge_error verdict built from the schema alone: the assembly steps may be what failed."""
    result = new_result(
        status=JUDGE_ERROR,
        stage=report["stage"],
        problem=names["problem"],
        solution=names["solution"],
        request_id=rid,
        error=report["error"],
        messages=report["messages"],
    )
    result.update(environment=environment, judge=dict(settings), reward_fn=settings.get("reward"))
    return result  # reward None: a judge error says nothing about the candidate
