"""Policies behind one interface (``Policy.start -> PolicyEpisode.act/observe``): ``openai`` (any
OpenAI-compatible endpoint), ``flax`` (our decoder, token-in-token-out, batched, KV cache kept across
turns), ``scripted`` (replays tool calls) and ``toy`` (the RL pipeline's toy plan policy on toy tasks).
``make_policy(PolicyConfig)`` builds one by name."""

from __future__ import annotations

from ..config import PolicyConfig
from .base import Policy, PolicyEpisode
from .chat import TINY_TEMPLATE, ChatFormat, TemplateError, parse_tool_calls
from .scripted import ScriptedPolicy


def make_policy(cfg: PolicyConfig, max_context: int = 131_072) -> Policy:
    """``max_context``: the run's context budget (``agent.max_context_tokens``), what an engine's pages
    must hold with one turn's ``max_tokens``."""
    cfg.check()
    if cfg.name == "scripted":
        return ScriptedPolicy.from_file(cfg.script)
    if cfg.name == "openai":
        from .openai_policy import OpenAIPolicy

        return OpenAIPolicy(
            model=cfg.model,
            base_url=cfg.base_url,
            api_key_env=cfg.api_key_env,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            backoff_s=cfg.backoff_s,
            seed=cfg.seed,
        )
    if cfg.name == "toy":
        from .toy_policy import ToyPolicy

        return ToyPolicy.from_checkpoint(
            cfg.model,
            turns=cfg.turns,
            temperature=cfg.temperature,
            max_plan_tokens=cfg.max_tokens,
            max_context=cfg.max_context,
            seed=cfg.seed,
        )
    from .flax_policy import FlaxPolicy, load_policy_model

    if cfg.generation.backend == "engine":  # a config error before any weights load
        cfg.generation.engine_config(max_context + cfg.max_tokens)
    model, tok, template = load_policy_model(cfg.model or "tiny", cfg.dtype, cfg.tokenizer, cfg.seed)
    return FlaxPolicy(
        model,
        tok,
        template=template,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        batch_buckets=cfg.batch_buckets,
        max_wait_s=cfg.max_wait_s,
        keep_cache=cfg.keep_cache,
        seed=cfg.seed,
        generation=cfg.generation,
        max_context=max_context,
    )


__all__ = [
    "TINY_TEMPLATE",
    "ChatFormat",
    "Policy",
    "PolicyEpisode",
    "ScriptedPolicy",
    "TemplateError",
    "make_policy",
    "parse_tool_calls",
]
