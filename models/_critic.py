"""The critic: a decoder backbone with a scalar value head. It never computes vocabulary logits."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from ._config import ModelConfig
from ._model import CausalLM, Decoder
from ._sharding import put

F32 = jnp.float32


class Critic(nnx.Module):
    """``critic(tokens [B, T]) -> values [B, T]`` (fp32), the value of each prefix.

    By default a separate model initialised from a policy checkpoint (:meth:`from_policy`); the value head
    is fp32 and its output is ``hidden . w + b`` on the final-norm hidden states."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs, value_init_std: float | None = None):
        self.config = cfg
        self.model = Decoder(cfg, rngs=rngs)
        std = cfg.initializer_range if value_init_std is None else value_init_std
        self.value_head = nnx.Param(std * jax.random.normal(rngs.params(), (cfg.hidden_size,), F32))
        self.value_bias = nnx.Param(jnp.zeros((), F32))

    def hidden_states(self, tokens, positions=None, attention_mask=None, *, segment_ids=None):
        return self.model(tokens, positions, attention_mask, segment_ids=segment_ids)

    def values_from_hidden(self, hidden):
        return jnp.einsum("btd,d->bt", hidden.astype(F32), self.value_head[...]) + self.value_bias[...]

    def __call__(self, tokens, positions=None, attention_mask=None, *, segment_ids=None):
        return self.values_from_hidden(self.model(tokens, positions, attention_mask, segment_ids=segment_ids))

    @classmethod
    def from_policy(cls, policy: CausalLM, *, seed: int = 0, value_init_std: float | None = None) -> Critic:
        """A critic with a copy of ``policy``'s backbone (its lm head dropped) and a new value head."""
        critic = nnx.eval_shape(lambda: cls(policy.config, rngs=nnx.Rngs(0), value_init_std=value_init_std))
        head, bias = cls._fresh_head(policy.config, seed, value_init_std), jnp.zeros((), F32)
        sharding = policy.model.embed.get_value().sharding
        if isinstance(sharding, NamedSharding):  # a sharded policy: the head lives replicated on its mesh
            head, bias = (put(a, NamedSharding(sharding.mesh, PartitionSpec())) for a in (head, bias))
        nnx.update(critic.model, jax.tree.map(jnp.copy, nnx.state(policy.model)))
        critic.value_head = nnx.Param(head)
        critic.value_bias = nnx.Param(bias)
        return critic

    @staticmethod
    def _fresh_head(cfg: ModelConfig, seed: int, value_init_std: float | None):
        std = cfg.initializer_range if value_init_std is None else value_init_std
        return std * jax.random.normal(jax.random.key(seed), (cfg.hidden_size,), F32)


def load_critic(
    path, dtype=None, *, seed: int = 0, value_init_std: float | None = None, mesh=None, rules=None, **runtime
) -> Critic:
    """A critic initialised from a Hugging Face policy checkpoint directory (see :func:`models.load_hf`)."""
    from ._hf import load_hf

    policy, _ = load_hf(path, dtype, mesh=mesh, rules=rules, **runtime)
    return Critic.from_policy(policy, seed=seed, value_init_std=value_init_std)
