"""Packed sequences (``segment_ids``): attention is causal and block-diagonal, checked against a float64
numpy reference, and a packed row's model outputs equal each sequence run alone (no leak across segments)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import models
from models._layers import attention


def _reference(q, k, v, seg):
    """Causal same-segment softmax attention in float64 numpy (GQA: query head n reads kv head n // g)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    b, t, n, h = q.shape
    g = n // k.shape[2]
    out = np.zeros_like(q)
    allowed = np.tril(np.ones((t, t), bool))[None] & (seg[:, :, None] == seg[:, None, :])
    for i in range(n):
        s = np.einsum("bth,bsh->bts", q[:, :, i], k[:, :, i // g]) / np.sqrt(h)
        s = np.where(allowed, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        out[:, :, i] = np.einsum("bts,bsh->bth", p, v[:, :, i // g])
    return out


def test_segment_attention_matches_float64_reference():
    rng = np.random.default_rng(0)
    b, t, n, kh, h = 2, 12, 4, 2, 8
    q, k, v = (rng.normal(size=(b, t, x, h)).astype(np.float32) for x in (n, kh, kh))
    seg = np.array([[1] * 5 + [2] * 4 + [0] * 3, [1] * 3 + [2] * 3 + [3] * 6], np.int32)
    out = attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), impl="xla", segment_ids=jnp.asarray(seg))
    np.testing.assert_allclose(np.asarray(out), _reference(q, k, v, seg), atol=2e-6, rtol=0)
    plain = attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), impl="xla")  # causal only: differs
    assert np.max(np.abs(np.asarray(plain) - np.asarray(out))) > 1e-2


def test_packed_row_equals_each_sequence_alone():
    cfg = models.tiny_config(
        vocab_size=64, num_layers=2, hidden_size=32, num_heads=2, num_kv_heads=1, head_dim=16,
        intermediate_size=64, compute_dtype="float32",
    )  # fmt: skip
    model = models.init_model(cfg, seed=0)
    critic = models.Critic.from_policy(model, seed=1)
    rng = np.random.default_rng(1)
    a, c = rng.integers(1, 64, 7), rng.integers(1, 64, 5)
    row = np.concatenate([a, c, np.zeros(4, np.int64)])[None].astype(np.int32)
    seg = np.array([[1] * 7 + [2] * 5 + [0] * 4], np.int32)
    pos = np.array([list(range(7)) + list(range(5)) + [0] * 4], np.int32)
    alone = [np.asarray(model(jnp.asarray(x[None], jnp.int32)))[0] for x in (a, c)]
    packed = np.asarray(model(jnp.asarray(row), jnp.asarray(pos), segment_ids=jnp.asarray(seg)))[0]
    np.testing.assert_allclose(packed[:7], alone[0], atol=1e-5, rtol=0)
    np.testing.assert_allclose(packed[7:12], alone[1], atol=1e-5, rtol=0)
    v_alone = np.asarray(critic(jnp.asarray(c[None], jnp.int32)))[0]
    v_packed = np.asarray(critic(jnp.asarray(row), jnp.asarray(pos), segment_ids=jnp.asarray(seg)))[0]
    np.testing.assert_allclose(v_packed[7:12], v_alone, atol=1e-5, rtol=0)
    # The second segment's next-token log-probs through token_logprobs equal the sequence's own.
    lp = np.asarray(
        models.token_logprobs(
            model, jnp.asarray(row), positions=jnp.asarray(pos), segment_ids=jnp.asarray(seg)
        )
    )[0]
    lp_alone = np.asarray(models.token_logprobs(model, jnp.asarray(c[None], jnp.int32)))[0]
    np.testing.assert_allclose(lp[7:11], lp_alone, atol=1e-5, rtol=0)
    # Without the segments the second sequence sees the first one: the check above can fail.
    leaky = np.asarray(model(jnp.asarray(row), jnp.asarray(pos)))[0]
    assert np.max(np.abs(leaky[7:12] - alone[1])) > 1e-3
