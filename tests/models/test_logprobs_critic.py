"""Chunked training log-probs (values, entropy, gradients, no full fp32 logits) and the critic."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import models

SMALL = dict(
    vocab_size=512,
    num_layers=2,
    hidden_size=64,
    head_dim=16,
    intermediate_size=128,
    compute_dtype="float32",
    tie_word_embeddings=False,
)
B, T = 2, 37


@pytest.fixture(scope="module")
def policy():
    return models.init_model(models.tiny_config(**SMALL), seed=1)


@pytest.fixture(scope="module")
def tokens():
    return jnp.asarray(np.random.RandomState(0).randint(0, 512, (B, T)), jnp.int32)


def _log_softmax64(logits):
    x = np.asarray(logits, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_chunked_logprobs_and_entropy_match_full_softmax(policy, tokens):
    fn = nnx.jit(
        lambda m, t: (m(t), models.token_logprobs(m, t, chunk_size=16, temperature=0.8, return_entropy=True))
    )
    logits, (lp, ent) = fn(policy, tokens)
    ref_lsm = _log_softmax64(np.asarray(logits)[:, :-1] / 0.8)
    ref = np.take_along_axis(ref_lsm, np.asarray(tokens)[:, 1:, None], axis=-1)[..., 0]
    assert lp.shape == (B, T - 1) and lp.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(lp), ref, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(ent), -(np.exp(ref_lsm) * ref_lsm).sum(-1), atol=1e-5, rtol=0)


@pytest.mark.slow  # ~14 s on 2 loaded cores (tests/_tiers.py)
def test_chunked_gradients_match_unchunked(policy, tokens):
    weights = jnp.asarray(np.random.RandomState(1).randn(B, T - 1), jnp.float32)

    def chunked(m):
        return jnp.sum(models.token_logprobs(m, tokens, chunk_size=16) * weights)

    def full(m):
        lsm = jax.nn.log_softmax(m(tokens)[:, :-1], axis=-1)
        return jnp.sum(jnp.take_along_axis(lsm, tokens[:, 1:, None], axis=-1)[..., 0] * weights)

    g1 = nnx.jit(nnx.grad(chunked))(policy)
    g2 = nnx.jit(nnx.grad(full))(policy)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=1e-4)


def _shapes(jaxpr, out):
    for eqn in jaxpr.eqns:
        out.extend(tuple(v.aval.shape) for v in eqn.outvars if hasattr(v.aval, "shape"))
        for p in eqn.params.values():
            for sub in p if isinstance(p, list | tuple) else [p]:
                inner = getattr(sub, "jaxpr", None)
                if inner is not None:
                    _shapes(getattr(inner, "jaxpr", inner), out)
    return out


def test_full_vocabulary_logits_never_materialise(policy, tokens):
    v = policy.config.vocab_size
    graphdef, state = nnx.split(policy)

    def loss(s):
        return jnp.sum(models.token_logprobs(nnx.merge(graphdef, s), tokens, chunk_size=16))

    shapes = _shapes(jax.make_jaxpr(jax.value_and_grad(loss))(state).jaxpr, [])
    with_vocab = [s for s in shapes if v in s and s != (v, policy.config.hidden_size)]
    assert with_vocab and all(int(np.prod(s)) <= 16 * v for s in with_vocab), sorted(set(with_vocab))


def test_critic_from_policy(policy, tokens):
    critic = models.Critic.from_policy(policy, seed=4, value_init_std=0.5)
    assert not hasattr(critic, "lm_head")
    values = nnx.jit(lambda c, t: c(t))(critic, tokens)
    assert values.shape == (B, T) and values.dtype == jnp.float32
    hidden = nnx.jit(lambda m, t: m.hidden_states(t))(policy, tokens)
    ref = np.asarray(hidden, np.float64) @ np.asarray(critic.value_head[...], np.float64)
    np.testing.assert_allclose(np.asarray(values), ref + float(critic.value_bias[...]), atol=1e-5)
    # A separate model: changing the critic leaves the policy alone.
    before = np.asarray(policy.model.final_norm[...]).copy()
    critic.model.final_norm[...] = jnp.zeros_like(critic.model.final_norm[...])
    assert np.array_equal(np.asarray(policy.model.final_norm[...]), before)


@pytest.mark.slow  # ~8 s on 2 loaded cores (tests/_tiers.py)
def test_critic_never_computes_vocabulary_logits(policy, tokens):
    critic = models.Critic.from_policy(policy)
    graphdef, state = nnx.split(critic)
    v = policy.config.vocab_size

    def loss(s):
        return jnp.mean(nnx.merge(graphdef, s)(tokens))

    jaxpr = jax.make_jaxpr(jax.value_and_grad(loss))(state).jaxpr
    shapes = _shapes(jaxpr, [])
    # Only the embedding table (and its gradient) has a vocabulary axis: no [..., V] activation exists.
    assert all(s == (v, policy.config.hidden_size) for s in shapes if v in s)
    grads = jax.jit(jax.grad(loss))(state)
    assert float(jnp.abs(grads["value_head"][...]).sum()) > 0
    assert float(jnp.abs(grads["model"]["layers"]["down"][...]).sum()) > 0


def test_load_critic_from_checkpoint(policy, tmp_path):
    models.save_hf(policy, tmp_path / "ckpt")
    critic = models.load_critic(tmp_path / "ckpt", compute_dtype="float32", seed=0)
    pa = nnx.to_pure_dict(nnx.state(policy.model))
    pc = nnx.to_pure_dict(nnx.state(critic.model))
    for a, b in zip(jax.tree.leaves(pa), jax.tree.leaves(pc)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
