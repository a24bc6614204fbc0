"""A policy that replays given tool calls (tests, demos, debugging): one list for every task, or one list
per task id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..actions import Action, ToolCall
from ..config import AgentConfigError
from .base import Policy, PolicyEpisode


def _call(item: Any, i: int) -> ToolCall:
    if not isinstance(item, dict) or "name" not in item:
        raise ValueError(f"script step {i} must be an object with a 'name' (and 'arguments'), got {item!r}")
    args = item.get("arguments", {})
    return ToolCall(
        id=f"call_{i}", name=str(item["name"]), arguments=args if isinstance(args, str) else json.dumps(args)
    )


class ScriptedEpisode(PolicyEpisode):
    def __init__(self, steps: list[Any]):
        self.steps, self.turn = steps, 0

    def act(self, messages):
        if self.turn >= len(self.steps):
            return Action(text="", finish_reason="script_end", error="the script has no more steps")
        step = self.steps[self.turn]
        self.turn += 1
        calls = step if isinstance(step, list) else [step]
        text = next((c.get("thought", "") for c in calls if isinstance(c, dict)), "")
        return Action(
            text=text,
            tool_calls=[_call(c, self.turn * 100 + j) for j, c in enumerate(calls)],
            finish_reason="tool_calls",
        )


class ScriptedPolicy(Policy):
    """``script``: a list of steps (a step is a call ``{"name", "arguments"}`` or a list of calls made in
    one turn), or a dict task id -> such a list ("*" for every other task)."""

    name = "scripted"

    def __init__(self, script: list | dict):
        if not isinstance(script, (list, dict)):
            raise ValueError("a script is a list of tool calls or a dict task id -> list")
        self.script = script

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedPolicy:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"policy.script={path}: no such file")
        try:
            return cls(json.loads(path.read_text()))
        except ValueError as exc:
            raise AgentConfigError(f"policy.script={path}: not valid JSON: {exc}") from None

    def start(self, task_id, messages, tools):
        steps = self.script
        if isinstance(steps, dict):
            steps = steps.get(task_id, steps.get("*"))
            if steps is None:
                raise ValueError(f"the script has no steps for task {task_id!r} (and no '*')")
        return ScriptedEpisode(list(steps))
