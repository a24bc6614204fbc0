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
from .rewards import get_reward
from .statuses import *  # noqa: F403 - the status vocabulary is part of the schema: importers read it here
from .statuses import OUTSIDE, REJECTED, STAGES, STATUSES

SCHEMA_VERSION = 1
# Keys added after schema version 1 was written: a record without them reads with their default.
ADDED_LATER = frozenset({"race_probe"})


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
