"""The one interface every policy implements: ``policy.start(task, messages, tools)`` gives a per-episode
object whose ``act(messages)`` returns the next assistant turn and whose ``observe(new_messages, results)``
takes the tool results the loop appended (the messages, and the calls' ``ToolResult`` with their structured
verdicts). Token policies also report their token-level trajectory."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..actions import Action

if TYPE_CHECKING:  # the tools import the sandbox client; a policy needs only the type
    from ..tools import ToolResult


class PolicyEpisode:
    """One episode's view of a policy. ``messages`` is the loop's chat history (OpenAI format)."""

    def act(self, messages: list[dict[str, Any]]) -> Action:
        raise NotImplementedError

    def observe(self, new_messages: list[dict[str, Any]], results: list[ToolResult] | None = None) -> None:
        """The messages appended after the last assistant turn (tool results, a note) and the turn's
        ``ToolResult`` per call, in order (None when the turn made no call: ``new_messages`` is a note).
        Read a ``verify`` / ``benchmark`` verdict from ``results[i].verdict``, never from its text."""

    def context_tokens(self, messages: list[dict[str, Any]]) -> int:
        """Tokens in the context now (an estimate of 4 bytes per token where the policy cannot count)."""
        return len(json.dumps(messages)) // 4

    def tokens(self):
        """Token policies: the episode's ``research.rollout.TrajectoryBuilder`` (prompt_ids, response_ids,
        response_mask, logprobs, turns), finished by the loop; None for text policies."""
        return None

    def close(self) -> None:
        """The episode ended (release caches, leave the batch)."""


class Policy:
    name = "policy"
    # False for a policy that never calls ``skill`` (its actions are fixed): the run then builds no skill
    # library (no BM25 index, no bm25s import).
    uses_skills = True

    def start(
        self, task_id: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> PolicyEpisode:
        raise NotImplementedError

    def prepare(self, tasks) -> None:
        """The run's tasks (``research.agent.Task``) before any episode starts: a policy that needs more
        than the prompt (the toy policy: its toy task) reads it from ``Task.meta``."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def close(self) -> None:
        pass
