"""One request inside the run worker, as every step of the judge's pipeline sees it (harness, families,
timed checks): the problem, the loaded candidate, the typed settings, the device, the guard, where progress
goes, the correctness record and notes the steps fill in, and the memory plan they keep to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ...rules.protocols import JudgeSettings
from ..check.memory import MemoryPlan
from .enforce import RequestGuard

Progress = Callable[[str, str], None]


@dataclass
class JudgeRequest:
    problem: Any  # the reference's module
    loaded: Any  # the candidate as loaded (``loader.load_solution``)
    settings: JudgeSettings
    device: torch.device
    guard: RequestGuard
    progress: Progress
    correctness: dict[str, Any] = field(default_factory=dict)
    notes: list[dict[str, Any]] = field(default_factory=list)
    memory: MemoryPlan | None = None  # what this request may keep alive at once (check.memory)

    def where(self, stage: str) -> dict[str, Any]:
        """What a candidate call is attributed to (``verdict.call_candidate``'s keywords)."""
        return {"loaded": self.loaded, "stage": stage, "device": self.device}
