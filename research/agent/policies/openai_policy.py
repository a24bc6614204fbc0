"""Any OpenAI-compatible chat-completions endpoint with native tool calling (frontier APIs, local vLLM or
SGLang servers), through the official ``openai`` client: retries with exponential backoff on 429, 5xx,
timeouts and connection errors; token usage recorded per turn."""

from __future__ import annotations

import os
import random
import time
from typing import Any

from ..actions import Action, ToolCall
from ..config import OpenAIPolicyConfig
from .base import Policy, PolicyEpisode


class OpenAIPolicy(Policy):
    name = "openai"

    def __init__(self, config: OpenAIPolicyConfig):
        """``config``: the endpoint, model and sampling settings (their defaults live there only)."""
        import openai

        config.check()
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ValueError(
                f"policy.api_key_env: environment variable {config.api_key_env!r} is not set (local servers "
                "accept any non-empty value)"
            )
        self._openai = openai
        # Retries are ours (counted and logged per turn), so the client's own are off.
        self.client = openai.OpenAI(
            base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=0
        )
        self.model, self.base_url = config.model, config.base_url
        self.temperature, self.max_tokens, self.seed = config.temperature, config.max_tokens, config.seed
        self.max_retries, self.backoff_s = config.max_retries, config.backoff_s

    def describe(self):
        return {"name": self.name, "model": self.model, "base_url": self.base_url}

    def start(self, task_id, messages, tools):
        return OpenAIEpisode(self, tools)

    def _retryable(self, exc: Exception) -> bool:
        o = self._openai
        if isinstance(exc, (o.RateLimitError, o.APIConnectionError, o.InternalServerError)):
            return True  # APITimeoutError is an APIConnectionError
        return isinstance(exc, o.APIStatusError) and exc.status_code >= 500

    def complete(self, messages, tools) -> tuple[Any, int]:
        """The chat completion and how many retries it took; raises after ``max_retries``."""
        for attempt in range(self.max_retries + 1):
            try:
                kwargs = dict(
                    model=self.model,
                    messages=messages,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                )
                if tools:
                    kwargs.update(tools=tools, tool_choice="auto")
                if self.seed is not None:
                    kwargs["seed"] = self.seed
                return self.client.chat.completions.create(**kwargs), attempt
            except Exception as exc:
                if attempt >= self.max_retries or not self._retryable(exc):
                    raise
                time.sleep(self.backoff_s * 2**attempt * (0.5 + random.random() / 2))
        raise AssertionError("unreachable")


class OpenAIEpisode(PolicyEpisode):
    def __init__(self, policy: OpenAIPolicy, tools):
        self.policy, self.tools = policy, tools
        self.last_usage = 0

    def act(self, messages):
        started = time.perf_counter()
        try:
            resp, retries = self.policy.complete(messages, self.tools)
        except Exception as exc:
            return Action(
                error=f"{type(exc).__name__}: {exc}",
                finish_reason="error",
                latency_s=time.perf_counter() - started,
            )
        choice = resp.choices[0] if resp.choices else None
        msg = choice.message if choice else None
        calls = []
        for i, tc in enumerate((msg.tool_calls if msg else None) or []):
            fn = getattr(tc, "function", None)
            name = getattr(fn, "name", None) or ""
            calls.append(
                ToolCall(
                    id=tc.id or f"call_{i}",
                    name=name,
                    arguments=getattr(fn, "arguments", None) or "{}",
                    error=None if name else "the tool call has no function name",
                )
            )
        usage = {}
        if resp.usage is not None:
            usage = {
                "prompt_tokens": resp.usage.prompt_tokens or 0,
                "completion_tokens": resp.usage.completion_tokens or 0,
            }
            self.last_usage = usage["prompt_tokens"] + usage["completion_tokens"]
        usage["retries"] = retries
        return Action(
            text=(msg.content if msg else "") or "",
            tool_calls=calls,
            finish_reason=(choice.finish_reason if choice else "") or "",
            usage=usage,
            latency_s=time.perf_counter() - started,
        )

    def context_tokens(self, messages):
        return self.last_usage or super().context_tokens(messages)
