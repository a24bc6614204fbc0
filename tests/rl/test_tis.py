"""Truncated importance sampling of the sampler/learner gap (LossConfig.tis_cap): the weights and the loss
against numpy in float64, and with no gap the corrected update is the plain one, bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from rl_fixtures import tiny_models, tiny_source

from research import rl
from research.rl import _update


def np_tis(old, sampler, mask, cap):
    raw = np.exp(np.asarray(old, np.float64) - np.asarray(sampler, np.float64))
    w = np.minimum(raw, cap)
    m = np.asarray(mask, np.float64)
    return w, (w * m).sum() / m.sum(), ((raw > cap) * m).sum() / m.sum()


def test_tis_weights_match_numpy():
    rng = np.random.default_rng(0)
    old = rng.normal(-2.0, 1.0, (4, 9)).astype(np.float32)
    sampler = (old + rng.normal(0.0, 0.8, old.shape)).astype(np.float32)
    sampler[0, 3] = old[0, 3] - 50.0  # exp(50) would be 5e21: truncated to the cap, never inf
    mask = (rng.random(old.shape) < 0.7).astype(np.float32)
    mask[0, 3] = 1.0
    w, metrics = jax.jit(_update.tis_weights, static_argnums=3)(old, sampler, mask, 2.0)
    want, mean, frac = np_tis(old, sampler, mask, 2.0)
    np.testing.assert_allclose(np.asarray(w), want, rtol=1e-6)
    assert np.asarray(w).max() <= 2.0 and np.isfinite(np.asarray(w)).all()
    np.testing.assert_allclose(float(metrics["tis/mean"]), mean, rtol=1e-6)
    np.testing.assert_allclose(float(metrics["tis/clipped_frac"]), frac, rtol=1e-6)
    assert 0 < frac < 1
    same, m2 = _update.tis_weights(old, old, mask, 2.0)
    assert (np.asarray(same) == 1.0).all() and float(m2["tis/clipped_frac"]) == 0.0


def test_tis_config_errors_are_one_line():
    cfg = lambda **kw: rl.LearnerConfig(loss=rl.LossConfig(tis_cap=kw.pop("cap")), **kw)
    assert not _update.tis_enabled(cfg(cap=None)) and not _update.tis_enabled(cfg(cap=0))
    assert _update.tis_enabled(cfg(cap=2.0))
    with pytest.raises(ValueError, match=r"^loss.tis_cap must be > 0 \(or 0 / null: off\), got -1.0$"):
        _update.tis_enabled(cfg(cap=-1.0))
    with pytest.raises(ValueError, match="needs old_logprobs=recompute, got 'sampler'") as e:
        _update.tis_enabled(cfg(cap=2.0, old_logprobs="sampler"))
    assert "\n" not in str(e.value)


@pytest.fixture(scope="module")
def batch():
    b, _, _ = tiny_source()(0)
    return b


@pytest.mark.slow  # three tiny learners compiled: ~40 s on 2 loaded cores (tests/_tiers.py)
def test_tis_loss_matches_numpy_and_no_gap_is_the_plain_update(batch):
    actor, critic = tiny_models(seed=11)
    cfg = lambda cap: rl.LearnerConfig(
        actor=rl.OptimConfig(lr=3e-3), critic=rl.OptimConfig(lr=3e-3), loss=rl.LossConfig(tis_cap=cap)
    )
    plain = rl.Learner(cfg(None), actor, critic)
    exact, _ = plain.prepare(batch)
    m = np.asarray(batch.response_mask, np.float64)
    learner_lp = np.asarray(exact.old_logprobs)  # the learner's recomputed log-probs (0 off policy tokens)

    # 1. A sampler whose log-probs differ from the learner's: weights above and below the cap of 2.
    gap = 0.9 * np.sin(np.arange(m.size)).reshape(m.shape)
    sampler = (learner_lp - gap * m).astype(np.float32)
    tis = rl.Learner(cfg(2.0), actor, critic)
    prepared, pm = tis.prepare(batch._replace(old_logprobs=sampler))
    w, mean, frac = np_tis(learner_lp, sampler, m, 2.0)
    np.testing.assert_allclose(np.asarray(prepared.tis_weights) * m, w * m, rtol=1e-6)
    np.testing.assert_allclose(pm["tis/mean"], mean, rtol=1e-6)
    np.testing.assert_allclose(pm["tis/clipped_frac"], frac, rtol=1e-6)
    assert 0 < frac < 1
    # The loss at old log-probs moved off the current policy (ratios away from 1, some clipped), against
    # numpy on log-probs from full-vocabulary logits (no chunking: an independent path).
    moved = prepared._replace(
        old_logprobs=prepared.old_logprobs + 0.3 * jnp.sin(2.0 * jnp.arange(m.size)).reshape(m.shape) * m
    )
    graphdef, params = nnx.split(actor)
    tokens = jnp.asarray(batch.tokens)
    logits = nnx.merge(graphdef, params)(tokens)[:, :-1]
    lp = np.zeros(m.shape)
    lp[:, 1:] = np.take_along_axis(
        np.asarray(jax.nn.log_softmax(logits, -1), np.float64), np.asarray(tokens)[:, 1:, None], -1
    )[..., 0]
    adv, old = np.asarray(moved.advantages, np.float64), np.asarray(moved.old_logprobs, np.float64)
    ratio = np.exp(lp - old)
    pg = np.maximum(-adv * ratio, -adv * np.clip(ratio, 0.8, 1.28))
    want = (pg * w * m).sum() / m.sum()
    dens = {"agg": jnp.asarray(m.sum(), jnp.float32), "tokens": jnp.asarray(m.sum(), jnp.float32)}
    got, aux = _update._actor_loss(params, moved, dens, actor_def=graphdef, cfg=tis.config)
    np.testing.assert_allclose(float(got), want, rtol=1e-5)
    assert float(aux["clip_frac"]) > 0
    without = (pg * m).sum() / m.sum()
    assert abs(want - without) > 1e-3 * abs(without)  # the correction is not a no-op here

    # 2. No gap (staleness 0, the sampler's log-probs the learner's): weights exactly 1 and the corrected
    # update equals the plain one exactly.
    fresh_tis = rl.Learner(cfg(2.0), actor, critic)
    for _ in range(2):  # each step's batch sampled (log-probs and all) by the current policy
        same = batch._replace(old_logprobs=np.asarray(plain.prepare(batch)[0].old_logprobs))
        p2, pm2 = fresh_tis.prepare(same)
        assert (np.asarray(p2.tis_weights)[m > 0] == 1.0).all() and pm2["tis/clipped_frac"] == 0.0
        a, b = plain.ppo_step(same), fresh_tis.ppo_step(same)
        assert {k: a[k] for k in a} == {k: b[k] for k in a} and b["tis/mean"] == 1.0
    for x, y in zip(jax.tree.leaves(plain.state.actor), jax.tree.leaves(fresh_tis.state.actor)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
