"""Policies behind one interface (``Policy.start -> PolicyEpisode.act/observe``), registered by name with
their own typed config (``research.agent.config``): ``openai`` (any OpenAI-compatible endpoint), ``flax``
(our decoder, token-in-token-out, batched, KV cache kept across turns), ``scripted`` (replays tool calls) and
``toy`` (the RL pipeline's toy plan policy on toy tasks). ``make_policy(config)`` builds one;
``policy_config(name, **settings)`` makes a config by name (a setting the policy lacks: a one-line error)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kernels_env.client import Registry

from ..config import (
    AgentConfigError,
    FlaxPolicyConfig,
    OpenAIPolicyConfig,
    PolicyConfig,
    ScriptedPolicyConfig,
    ToyPolicyConfig,
)
from .base import Policy, PolicyEpisode
from .chat import TINY_TEMPLATE, ChatFormat, TemplateError, parse_tool_calls
from .scripted import ScriptedPolicy


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """A registered policy: its config dataclass and how to build it (``build(config, max_context)``)."""

    config: type[PolicyConfig]
    build: Callable[[Any, int], Policy]


POLICIES: Registry[PolicySpec] = Registry("policy")


def register_policy(config: type[PolicyConfig]):
    """Register the decorated ``build(config, max_context) -> Policy`` under ``config``'s ``name``."""

    def wrap(build: Callable[[Any, int], Policy]):
        POLICIES.register(config.__dataclass_fields__["name"].default, PolicySpec(config, build))
        return build

    return wrap


def policy_spec(name: str) -> PolicySpec:
    if name not in POLICIES:
        raise AgentConfigError(f"policy must be one of {tuple(POLICIES)}, got {name!r}")
    return POLICIES[name]


def check_settings(name: str, keys) -> type[PolicyConfig]:
    """The config class of policy ``name``; an ``AgentConfigError`` naming the first of ``keys`` it lacks."""
    config = policy_spec(name).config
    fields = [f.name for f in dataclasses.fields(config)]
    for key in keys:
        if key not in fields:
            known = ", ".join(fields)
            raise AgentConfigError(f"policy={name} has no setting {key!r} (its settings: {known})")
    return config


def policy_config(name: str, **settings) -> PolicyConfig:
    """Policy ``name``'s config: its dataclass defaults with ``settings`` over them."""
    return check_settings(name, settings)(name=name, **settings)


def make_policy(cfg: PolicyConfig, max_context: int = 131_072) -> Policy:
    """``max_context``: the run's context budget (``agent.max_context_tokens``), what an engine's pages
    must hold with one turn's ``max_tokens``."""
    spec = policy_spec(cfg.name)
    if not isinstance(cfg, spec.config):
        raise AgentConfigError(f"policy={cfg.name} takes a {spec.config.__name__}, got {type(cfg).__name__}")
    cfg.check()
    return spec.build(cfg, max_context)


@register_policy(ScriptedPolicyConfig)
def _scripted(cfg: ScriptedPolicyConfig, max_context: int) -> Policy:
    return ScriptedPolicy.from_file(cfg.script)


@register_policy(OpenAIPolicyConfig)
def _openai(cfg: OpenAIPolicyConfig, max_context: int) -> Policy:
    from .openai_policy import OpenAIPolicy  # the openai client only when asked for

    return OpenAIPolicy(cfg)


@register_policy(ToyPolicyConfig)
def _toy(cfg: ToyPolicyConfig, max_context: int) -> Policy:
    from .toy_policy import ToyPolicy  # jax and the toy environment only when asked for

    # ToyPolicy.from_checkpoint's own arguments (its tests load it without a config); alike in shape only.
    return ToyPolicy.from_checkpoint(
        cfg.model,
        turns=cfg.turns,
        temperature=cfg.temperature,
        max_plan_tokens=cfg.max_tokens,
        max_context=cfg.max_context,
        seed=cfg.seed,
    )


@register_policy(FlaxPolicyConfig)
def _flax(cfg: FlaxPolicyConfig, max_context: int) -> Policy:
    from .flax_policy import FlaxPolicy, load_policy_model  # jax and models only when asked for

    if cfg.generation.backend == "engine":  # a config error before any weights load
        cfg.generation.engine_config(max_context + cfg.max_tokens)
    model, tok, template = load_policy_model(cfg.model or "tiny", cfg.dtype, cfg.tokenizer, cfg.seed)
    # FlaxPolicy takes plain arguments: RL and the benchmarks build it without a config.
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
    "POLICIES",
    "TINY_TEMPLATE",
    "ChatFormat",
    "Policy",
    "PolicyEpisode",
    "PolicySpec",
    "ScriptedPolicy",
    "TemplateError",
    "check_settings",
    "make_policy",
    "parse_tool_calls",
    "policy_config",
    "register_policy",
]
