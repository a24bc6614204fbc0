"""Build a policy or critic from a typed spec (what a Hydra ``model=`` config group fills)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ._config import ModelConfig
from ._critic import Critic
from ._model import CausalLM, init_model
from ._tokenizer import load_tokenizer


@dataclass
class ModelSpec:
    """Where a model comes from. ``checkpoint``: a local Hugging Face directory; None: random init of
    ``arch`` (the tiny embedded default unless overridden). The runtime fields below, when set, override
    those of the checkpoint's or ``arch``'s config. ``tokenizer``: a directory; None: the checkpoint's,
    else the bundled BPE tokenizer."""

    checkpoint: str | None = None
    arch: ModelConfig = field(default_factory=ModelConfig)
    param_dtype: str | None = None
    compute_dtype: str | None = None
    attention_impl: str | None = None
    remat: str | None = None
    scan_layers: bool | None = None
    tokenizer: str | None = None
    seed: int = 0

    def runtime(self) -> dict:
        names = ("param_dtype", "compute_dtype", "attention_impl", "remat", "scan_layers")
        return {k: getattr(self, k) for k in names if getattr(self, k) is not None}


def build_model(spec: ModelSpec, *, mesh=None, rules=None) -> tuple[CausalLM, ModelConfig, object]:
    """(policy, config, tokenizer) for ``spec``; sharded onto ``mesh`` when given."""
    from ._hf import load_hf
    from ._sharding import shard_model

    if spec.checkpoint:
        model, cfg = load_hf(spec.checkpoint, mesh=mesh, rules=rules, **spec.runtime())
    else:
        cfg = dataclasses.replace(spec.arch, **spec.runtime())
        model = init_model(cfg, spec.seed)
        if mesh is not None:
            model = shard_model(model, mesh, rules)
    tok_dir = spec.tokenizer or spec.checkpoint
    return model, cfg, load_tokenizer(tok_dir)


def build_critic(spec: ModelSpec, *, mesh=None, rules=None, value_init_std: float | None = None) -> Critic:
    """A critic initialised from the policy that ``spec`` describes."""
    policy, _, _ = build_model(spec, mesh=mesh, rules=rules)
    return Critic.from_policy(policy, seed=spec.seed, value_init_std=value_init_std)
