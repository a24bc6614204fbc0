"""The learner on a tiny model (fp32 compute, so comparisons are at fp32 rounding): gradient accumulation
equals the full batch, the RFT NLL covers policy tokens only, PPO's first update is on-policy and later ones
improve the surrogate, KL options are wired, value pretraining raises the explained variance."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from rl_fixtures import tiny_models, tiny_source

from research import rl
from research.rl import _update


@pytest.fixture(scope="module")
def batch():
    b, _, _ = tiny_source()(0)
    return b


def leaves(tree):
    return [np.asarray(x, np.float64) for x in jax.tree.leaves(tree)]


def max_rel(a, b):
    """max |a - b| / max |b| over all leaves (gradients of order 1e-3..1 in these models)."""
    return max(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-12) for x, y in zip(leaves(a), leaves(b)))


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean"])
@pytest.mark.slow  # ~38 s on 2 loaded cores (tests/_tiers.py)
def test_grad_accumulation_equals_full_batch(batch, aggregation):
    actor, critic = tiny_models()
    cfg = lambda n: rl.LearnerConfig(micro_batches=n, loss=rl.LossConfig(aggregation=aggregation))
    full = rl.Learner(cfg(1), actor, critic)
    prepared, _ = full.prepare(batch)
    # Perturb the old log-probs so ratios differ from 1 and clipping is exercised.
    prepared = prepared._replace(
        old_logprobs=prepared.old_logprobs
        + 0.3
        * jnp.sin(jnp.arange(prepared.tokens.size)).reshape(prepared.tokens.shape)
        * prepared.response_mask
    )
    ga, gc, m1 = full.gradients(prepared)
    acc = rl.Learner(cfg(4), actor, critic)
    ga4, gc4, m4 = acc.gradients(prepared)
    # fp32: sums of 4 partial sums vs one sum of products of order 1; 1e-5 relative to the largest entry.
    assert max_rel(ga4, ga) < 1e-5
    assert max_rel(gc4, gc) < 1e-5
    assert m1["clip_frac"] > 0
    for k in ("pg_loss", "clip_frac", "ppo_kl", "value_loss", "actor_loss"):
        np.testing.assert_allclose(m4[k], m1[k], rtol=1e-5, atol=1e-7)


@pytest.mark.slow  # ~48 s on 2 loaded cores (tests/_tiers.py)
def test_rft_nll_masks_observation_tokens(batch):
    actor, _ = tiny_models(seed=3)
    learner = rl.Learner(rl.LearnerConfig(), actor, None)
    graphdef, params = nnx.split(actor)
    tokens = jnp.asarray(batch.tokens)
    mask = np.asarray(batch.response_mask)
    assert (mask == 0).sum() > (batch.tokens.shape[0] * 5)  # prompts, observations and padding are masked

    def reference(p):  # full-vocabulary logits, no chunking: an independent path
        logits = nnx.merge(graphdef, p)(tokens)[:, :-1]
        lp = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), tokens[:, 1:, None], -1)[..., 0]
        m = jnp.asarray(mask[:, 1:])
        return -(lp * m).sum() / m.sum()

    want, want_grads = jax.value_and_grad(reference)(params)
    got, grads = jax.jit(
        jax.value_and_grad(
            lambda p: _update._rft_loss(
                p,
                learner.put(batch),
                {"agg": mask.sum(), "tokens": mask.sum()},
                actor_def=graphdef,
                cfg=learner.config,
            )[0]
        )
    )(params)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
    assert max_rel(grads, want_grads) < 1e-4
    # ...and the step reports the same NLL, then lowers it.
    first = learner.rft_step(batch)["nll"]
    np.testing.assert_allclose(first, float(want), rtol=1e-5)
    learner.config.actor.lr = 3e-6  # defaults; the NLL still moves down on repeated steps at 1e-2:
    faster = rl.Learner(rl.LearnerConfig(actor=rl.OptimConfig(lr=1e-2)), actor, None)
    nll = [faster.rft_step(batch)["nll"] for _ in range(5)]
    assert nll[-1] < nll[0] - 0.1


@pytest.mark.slow  # ~46 s on 2 loaded cores (tests/_tiers.py)
def test_ppo_first_update_is_on_policy_and_updates_improve_the_surrogate(batch):
    actor, critic = tiny_models(seed=5)
    cfg = rl.LearnerConfig(
        actor=rl.OptimConfig(lr=3e-3),
        critic=rl.OptimConfig(lr=3e-3),
        advantage=rl.AdvantageConfig(estimator="gae", whiten=True),
    )
    learner = rl.Learner(cfg, actor, critic)
    prepared, pm = learner.prepare(batch)
    m = np.asarray(prepared.response_mask)
    first = learner.update(prepared)
    assert first["ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert first["clip_frac"] == 0.0 and abs(first["ppo_kl"]) < 1e-7
    adv = np.asarray(prepared.advantages)
    np.testing.assert_allclose(first["pg_loss"], -(adv * m).sum() / m.sum(), atol=1e-6)
    assert 0 < first["value_loss"] and np.isfinite(pm["explained_variance"])
    surrogate = lambda: float(-learner.gradients(prepared)[2]["pg_loss"])
    s0 = surrogate()
    for _ in range(4):
        last = learner.update(prepared)
    assert surrogate() > s0 + 1e-3
    assert last["clip_frac"] > 0  # moved beyond the trust region on some tokens
    assert int(learner.state.step) == 5


@pytest.mark.slow  # ~46 s on 2 loaded cores (tests/_tiers.py)
def test_kl_penalties_are_wired(batch):
    actor, _ = tiny_models(seed=7)
    ref, _ = tiny_models(seed=8)
    est = rl.AdvantageConfig(estimator="rloo")
    k1 = rl.Learner(
        rl.LearnerConfig(loss=rl.LossConfig(kl_penalty="k1_reward", kl_coef=0.5), advantage=est),
        actor,
        None,
        ref,
    )
    prepared, pm = k1.prepare(batch)
    old, rlp = np.asarray(prepared.old_logprobs, np.float64), np.asarray(prepared.ref_logprobs, np.float64)
    m = np.asarray(batch.response_mask)
    score = ((np.asarray(batch.token_rewards) - 0.5 * (old - rlp) * m) * m).sum(1)  # gamma 1, final rewards
    g = np.asarray(batch.group_ids)
    want = np.array([score[b] - score[(g == g[b]) & (np.arange(len(g)) != b)].mean() for b in range(len(g))])
    got = np.asarray(prepared.advantages)
    for b in range(len(g)):
        np.testing.assert_allclose(got[b][m[b] > 0], want[b], rtol=1e-5, atol=1e-5)
    assert pm["kl_ref"] > 0
    k3 = rl.Learner(
        rl.LearnerConfig(loss=rl.LossConfig(kl_penalty="k3_loss", kl_coef=0.5), advantage=est),
        actor,
        None,
        ref,
    )
    prepared3, pm3 = k3.prepare(batch)
    out = k3.update(prepared3)
    np.testing.assert_allclose(out["kl_loss"], pm3["kl_ref"], rtol=1e-5)  # on-policy: same tokens, same k3
    np.testing.assert_allclose(out["actor_loss"], out["pg_loss"] + 0.5 * out["kl_loss"], rtol=1e-5)
    with pytest.raises(ValueError, match="reference policy"):
        rl.Learner(rl.LearnerConfig(loss=rl.LossConfig(kl_penalty="k3_loss")), actor, None)


@pytest.mark.slow  # ~32 s on 2 loaded cores (tests/_tiers.py)
def test_value_pretraining_raises_explained_variance(batch):
    _, critic = tiny_models(seed=9)
    cfg = rl.LearnerConfig(critic=rl.OptimConfig(lr=3e-3), loss=rl.LossConfig(value_clip=None))
    learner = rl.Learner(cfg, None, critic)
    ev = [learner.value_step(batch)["explained_variance"] for _ in range(25)]
    assert ev[0] < 0.3 and ev[-1] > 0.7, ev
    m = np.asarray(batch.response_mask)
    x = np.random.default_rng(0).normal(size=m.shape)
    y = x + 0.1 * np.random.default_rng(1).normal(size=m.shape)
    sel = m > 0
    want = 1 - np.var((y - x)[sel]) / np.var(y[sel])
    np.testing.assert_allclose(float(rl.explained_variance(x, y, m)), want, rtol=1e-5)
