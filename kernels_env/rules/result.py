"""The one result schema of the sandbox: what ``SandboxClient.evaluate`` returns and batch files hold.

A result is a plain JSON object (``dict``) with the keys of the ``Result`` dataclass, all always present.
See docs/sandbox.md for the field-by-field description.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .messages import PROTOCOL_VERSION

SCHEMA_VERSION = 1
# Keys added after schema version 1 was written: a record without them reads with their default.
ADDED_LATER = frozenset({"race_probe"})

CORRECT = "correct"
INCORRECT = "incorrect"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
REJECTED = "rejected"  # a policy check failed (``check`` names it, ``evidence`` says why)
NOT_RUN = "not_run"  # CPU mode: a CUDA solution compiled but cannot run here (reward null)
# Verdicts that are not the candidate's doing: no reward, counted apart from the candidate's failures.
JUDGE_ERROR = "judge_error"  # the judge itself failed (its own exception, its own out-of-memory): a traceback
REFERENCE_ERROR = "reference_error"  # the reference problem cannot be loaded or run
# This machine cannot judge the request (issue 31): the problem needs more memory than the host (CPU mode) or
# the device has free, estimated before anything ran; the solution's backend (CuTe DSL, TileLang,
# ThunderKittens) has no toolchain installed here, named in the error.
INSUFFICIENT_MEMORY = "insufficient_memory"
TOOLCHAIN_MISSING = "toolchain_missing"
MACHINE_LIMITS = (INSUFFICIENT_MEMORY, TOOLCHAIN_MISSING)
# Verdicts made outside the judge (``Result.outside``: the agent loop, RL rollouts, evaluation reports), so
# that every verdict anywhere has this schema and one vocabulary. The judge never gives them, and a stage's
# report that claims one is the judge's failure (``JUDGE_STATUSES``).
NO_SOLUTION = "no_solution"  # nothing judgeable was left (no model_new.py, an action that made no candidate)
INFRA_ERROR = "infra_error"  # the sandbox could not be reached, did not answer or its wait ran out
OUTSIDE = (NO_SOLUTION, INFRA_ERROR)
# Statuses without a reward (not the candidate's doing).
NO_VERDICT = (NOT_RUN, JUDGE_ERROR, REFERENCE_ERROR, *MACHINE_LIMITS, INFRA_ERROR)
FAILURES = (INCORRECT, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, REJECTED, NO_SOLUTION)  # the failure reward
STATUSES = (CORRECT, *FAILURES, *NO_VERDICT)
JUDGE_STATUSES = tuple(s for s in STATUSES if s not in OUTSIDE)

STAGES = ("compile", "load", "correctness", "timing", "done")


@dataclass
class Result:
    """The verdict on one candidate. ``SandboxClient.evaluate`` returns ``Result.to_dict()`` (plain JSON);
    ``Result.from_dict`` / ``from_json`` read one back (another ``schema_version`` is a clear error)."""

    status: str
    stage: str  # the last stage reached
    problem: str = ""
    solution: str = ""
    id: str = ""
    error: str | None = None  # one line for humans: why it failed (null when correct)
    check: str | None = None  # rejected: the policy check that failed
    evidence: Any = None
    reward: float | None = None
    reward_fn: str | None = None
    correctness: dict[str, Any] | None = None  # trials, seeds, tolerances, errors (see docs)
    timings: dict[str, Any] | None = None  # {"comparable", "unit", "candidate", "baselines"}
    speedups: dict[str, float | None] = field(default_factory=dict)  # mode -> t_baseline / t_candidate
    messages: list[dict[str, Any]] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)  # load_inline, fastpath, cupy, nvcc, triton, torch
    judge: dict[str, Any] = field(default_factory=dict)  # the resolved protocol / policy / reward settings
    environment: dict[str, Any] = field(default_factory=dict)
    durations_s: dict[str, Any] = field(default_factory=dict)  # stage seconds; run_phases: by phase
    race_probe: dict[str, Any] | None = None  # racecheck of a correct GPU verdict, when it ran
    schema_version: int = SCHEMA_VERSION
    protocol_version: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; known: {STATUSES}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"result schema version {version!r} is not supported (this reader: {SCHEMA_VERSION})"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        missing = names - set(data) - ADDED_LATER  # records written before those keys existed lack them
        if missing:
            raise ValueError(f"result lacks keys {sorted(missing)}")
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"result has unknown keys {sorted(unknown)}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Result:
        return cls.from_dict(json.loads(text))

    @classmethod
    def outside(
        cls,
        status: str,
        error: str,
        *,
        problem: str = "",
        solution: str = "",
        reward_fn: str | None = None,
        stage: str = "compile",
    ) -> Result:
        """A verdict made outside the judge (``OUTSIDE``): ``no_solution`` gets ``reward_fn``'s failure
        reward (a name of ``rules.rewards``; None: no reward), ``infra_error`` none. ``stage`` is
        ``compile``: no stage of the judge was reached."""
        if status not in OUTSIDE:
            raise ValueError(f"only the judge gives {status!r}; a verdict made outside it: one of {OUTSIDE}")
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; known: {STAGES}")
        from .rewards import get_reward  # rewards reads this module's statuses

        reward = None if reward_fn is None else get_reward(reward_fn)(status, {})
        return cls(status, stage, problem, solution, error=error, reward=reward, reward_fn=reward_fn)


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
    """A result dict with every key present (consumers never need ``.get`` for top-level keys)."""
    return Result(
        status=status,
        stage=stage,
        problem=problem,
        solution=solution,
        id=request_id,
        error=error,
        messages=list(messages or []),
        check=check,
        evidence=evidence,
    ).to_dict()


def message(kind: str, text: str = "", **fields: Any) -> dict[str, Any]:
    """A structured message: kind is one of compiler, mismatch, traceback, error, log, note."""
    return {"kind": kind, "text": text, **fields}


def validate(result: dict[str, Any]) -> None:
    """Raise ``ValueError`` when ``result`` does not follow the schema (used by tests and readers)."""
    parsed = Result.from_dict(result)
    if parsed.status == REJECTED and not parsed.check:
        raise ValueError("a rejected result names the check that failed")
    for msg in parsed.messages:
        if not isinstance(msg, dict) or "kind" not in msg:
            raise ValueError(f"malformed message {msg!r}")
