"""How failures inside the run worker become verdicts: the candidate's (``Verdict``) or the problem's.

Candidate code (and code run on its outputs) goes through ``call_candidate``: any exception becomes the
candidate's verdict (a ``PolicyViolation`` from the guard: ``rejected`` with its check and evidence).
Reference code goes through ``call_problem``: its failures are ``ProblemError`` (a user error, never blamed
on the candidate). Out-of-memory errors in either become ``oom.OutOfMemory``: whose they are is decided
by the request's memory plan (``kernels_env.judge.check.memory``), not here. Anything else that escapes is
``unexpected``: the innermost frame of the candidate's or the reference's files in its traceback says whose
it is; with neither, it is the judge's own failure (``judge_error`` with the judge's traceback: no reward,
never the candidate's fault).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ...rules.policies import PolicyViolation
from ...rules.result import NOT_RUN, REJECTED, RUNTIME_ERROR, message
from ..assemble.result import judge_error
from ..build import loader
from ..build.backends import NO_DEVICE
from ..build.diagnostics import exception_line, trim_traceback, truncate
from ..build.errors import ProblemError
from ..check.oom import OutOfMemory, is_oom, raised_in


class Verdict(Exception):
    """Ends a request early with a verdict for the candidate."""

    def __init__(self, status: str, stage: str, error: str, messages=None, check=None, evidence=None, **more):
        super().__init__(error)
        self.payload = {
            "status": status,
            "stage": stage,
            "error": error,
            "messages": list(messages or []),
            "check": check,
            "evidence": evidence,
            **more,  # e.g. memory_estimate (kernels_env.judge.run.preflight)
        }

    @property
    def status(self) -> str:
        return self.payload["status"]


def rejected(exc: PolicyViolation, stage: str) -> Verdict:
    evidence = {**(exc.evidence or {}), "stage": stage} if isinstance(exc.evidence, dict) else exc.evidence
    return Verdict(
        REJECTED, stage, f"policy check {exc.check!r} failed: {exc}", check=exc.check, evidence=evidence
    )


def candidate_failure(exc: BaseException, loaded: loader.Loaded, stage: str, device: torch.device) -> Verdict:
    if isinstance(exc, PolicyViolation):
        return rejected(exc, stage)
    if isinstance(exc, Verdict):
        return exc
    err = loader.classify_exception(exc, loaded, RUNTIME_ERROR, during=stage)
    if device.type == "cpu" and err.status == RUNTIME_ERROR and NO_DEVICE.search(str(exc)):
        return Verdict(NOT_RUN, stage, f"needs a CUDA device (CPU mode): {exception_line(exc)}", err.messages)
    return Verdict(err.status, stage, err.error, err.messages)


def call_problem(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Run reference code: its failures are the problem's (``ProblemError``), never the candidate's."""
    try:
        return fn(*args)
    except (Verdict, ProblemError, OutOfMemory):
        raise
    except Exception as exc:
        if is_oom(exc):  # the judge's memory, not a broken reference
            raise OutOfMemory(f"reference {what}: {exception_line(exc)}", False) from None
        raise ProblemError(f"reference {what} failed: {exception_line(exc)}") from None


def call_candidate(fn: Callable[..., Any], *args: Any, loaded, stage: str, device: torch.device) -> Any:
    """Run candidate code (or code on its outputs): its failures become the candidate's verdict."""
    try:
        return fn(*args)
    except OutOfMemory:
        raise
    except BaseException as exc:  # also SystemExit / KeyboardInterrupt raised by the candidate
        verdict = candidate_failure(exc, loaded, stage, device)
        if is_oom(exc):
            mine = raised_in(exc, loaded.files) and not isinstance(exc, PolicyViolation)
            raise OutOfMemory(f"{stage}: {exception_line(exc)}", mine, verdict) from None
        raise verdict from None


def unexpected(exc: BaseException, stage: str, candidate_dir: Path, reference_dir: Path) -> dict[str, Any]:
    """What an exception that escaped every ``call_candidate`` / ``call_problem`` becomes: the candidate's
    ``runtime_error`` or the reference's ``problem_error`` when the innermost frame of their files raised it
    (their code ran inside a judge step: a method the judge called), else ``judge_error``."""
    prefixes = {"candidate": _prefix(candidate_dir), "reference": _prefix(reference_dir)}
    frames = traceback.extract_tb(exc.__traceback__)
    owners = [o for f in frames for o, prefix in prefixes.items() if _resolved(f.filename).startswith(prefix)]
    owner = owners[-1] if owners else "judge"
    line = exception_line(exc)
    if owner == "candidate":
        files = {f.filename for f in frames if _resolved(f.filename).startswith(prefixes["candidate"])}
        trace = trim_traceback(exc, files, {prefixes["candidate"]: "", str(candidate_dir) + "/": ""})
        tb = message("traceback", trace, exception=type(exc).__name__)
        return Verdict(RUNTIME_ERROR, stage, f"{line} (during {stage})", [tb]).payload
    if owner == "reference":
        return {"problem_error": f"reference failed: {line}"}
    return judge_error(stage, line, truncate("".join(traceback.format_exception(exc))))


def _prefix(directory: Path) -> str:
    return str(directory.resolve()) + "/"


def _resolved(filename: str) -> str:
    return str(Path(filename).resolve()) if filename.startswith("/") else filename
