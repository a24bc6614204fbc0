"""What a policy returns each turn (an assistant message with tool calls) and what the loop sends back."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """One requested tool call. ``arguments`` is the raw JSON text the model wrote; ``error`` says why the
    call could not even be read (then the loop answers with that error instead of running a tool)."""

    id: str
    name: str
    arguments: str = "{}"
    error: str | None = None

    def parsed(self) -> tuple[dict[str, Any] | None, str | None]:
        """(arguments as a dict, None) or (None, a one-line error)."""
        if self.error:
            return None, self.error
        try:
            args = json.loads(self.arguments) if self.arguments and self.arguments.strip() else {}
        except ValueError as exc:
            return None, f"arguments of {self.name!r} are not valid JSON ({exc})"
        if not isinstance(args, dict):
            return None, f"arguments of {self.name!r} must be a JSON object, got {type(args).__name__}"
        return args, None


@dataclass
class Action:
    """One assistant turn: its text, the tool calls in it, why generation stopped, and token usage
    (``prompt_tokens``/``completion_tokens`` as the policy counted them)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    error: str | None = None  # the policy could not produce a turn (e.g. the endpoint failed for good)

    def message(self) -> dict[str, Any]:
        """The chat-completions assistant message of this turn."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return msg

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
