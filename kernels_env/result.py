"""The one result schema of the sandbox: what ``SandboxClient.evaluate`` returns and batch files hold.

A result is a plain JSON object (``dict``); ``new_result`` builds one with every key present, so consumers
never need ``.get`` for top-level keys. See docs/sandbox.md for the field-by-field description.
"""

from __future__ import annotations

from typing import Any

from .protocol import PROTOCOL_VERSION

SCHEMA_VERSION = 1

CORRECT = "correct"
INCORRECT = "incorrect"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
REJECTED = "rejected"  # a policy check failed (``check`` names it, ``evidence`` says why)
NOT_RUN = "not_run"  # CPU mode: a CUDA solution compiled but cannot run here (reward null)
STATUSES = (CORRECT, INCORRECT, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, REJECTED, NOT_RUN)
FAILURES = (INCORRECT, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, REJECTED)

STAGES = ("compile", "load", "correctness", "timing", "done")


def new_result(
    *,
    status: str,
    stage: str,
    problem: str = "",
    solution: str = "",
    request_id: str = "",
    error: str | None = None,
    messages: list[dict[str, Any]] | None = None,
    check: str | None = None,
    evidence: Any = None,
) -> dict[str, Any]:
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; known: {STATUSES}")
    return {
        "schema_version": SCHEMA_VERSION,
        "protocol_version": PROTOCOL_VERSION,
        "id": request_id,
        "problem": problem,
        "solution": solution,
        "status": status,
        "stage": stage,  # the last stage reached
        "error": error,  # one line for humans: why it failed (null when correct)
        "check": check,  # rejected: the policy check that failed
        "evidence": evidence,
        "reward": None,
        "reward_fn": None,
        "correctness": None,  # trials, seeds, tolerances, errors (see docs)
        "timings": None,  # {"comparable", "unit", "candidate", "baselines"}
        "speedups": {},  # baseline mode -> t_baseline / t_candidate (null: unknown)
        "messages": list(messages or []),
        "backends": [],  # what the solution built or used: load_inline, fastpath, nvrtc, cupy, triton, ...
        "judge": {},  # the resolved protocol / policy / reward settings
        "environment": {},
        "durations_s": {},
    }


def message(kind: str, text: str = "", **fields: Any) -> dict[str, Any]:
    """A structured message: kind is one of compiler, mismatch, traceback, error, log, note."""
    return {"kind": kind, "text": text, **fields}


def is_failure(result: dict[str, Any]) -> bool:
    return result.get("status") in FAILURES


def validate(result: dict[str, Any]) -> None:
    """Raise ``ValueError`` when ``result`` does not follow the schema (used by tests and readers)."""
    template = new_result(status=CORRECT, stage="done")
    missing = set(template) - set(result)
    if missing:
        raise ValueError(f"result lacks keys {sorted(missing)}")
    if result["schema_version"] != SCHEMA_VERSION:
        raise ValueError(f"result schema {result['schema_version']} is not {SCHEMA_VERSION}")
    if result["status"] not in STATUSES:
        raise ValueError(f"unknown status {result['status']!r}")
    if result["status"] == REJECTED and not result["check"]:
        raise ValueError("a rejected result names the check that failed")
    for msg in result["messages"]:
        if not isinstance(msg, dict) or "kind" not in msg:
            raise ValueError(f"malformed message {msg!r}")
