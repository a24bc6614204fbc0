"""PPO surrogate (clip-higher, dual-clip), value loss, KL estimators and aggregations vs float64 numpy
references written piecewise (not as the max/min formula the code uses); the KL bias claim of the docs
checked exactly on a categorical distribution. Tolerance 1e-5: fp32 arithmetic on values of order 1."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from research import rl

TOL = dict(rtol=1e-5, atol=1e-6)


def np_ppo(lp, old, adv, el, eh, c=None):
    r = np.exp(lp - old)
    loss = np.zeros_like(r)
    clipped = np.zeros(r.shape, bool)
    for i in np.ndindex(r.shape):
        a, x = adv[i], r[i]
        if a >= 0:
            loss[i] = -a * min(x, 1 + eh)
            clipped[i] = a > 0 and x > 1 + eh
        else:
            loss[i] = -a * max(x, 1 - el)
            clipped[i] = x < 1 - el
            if c is not None and loss[i] > -a * c:
                loss[i], clipped[i] = -a * c, True
    return loss, clipped


@pytest.mark.parametrize("dual_clip", [None, 3.0])
def test_ppo_clip_higher_and_dual_clip(dual_clip):
    rng = np.random.default_rng(0)
    lp = rng.normal(-2, 1, (4, 50))
    old = lp + rng.normal(0, 0.8, lp.shape)  # ratios from ~0.1 to ~10: every branch is hit
    adv = rng.normal(size=lp.shape)
    cfg = rl.LossConfig(dual_clip=dual_clip)
    loss, clipped, ratio = jax.jit(lambda a, b, c: rl.ppo_clip(a, b, c, cfg))(
        *(x.astype(np.float32) for x in (lp, old, adv))
    )
    want, want_clip = np_ppo(lp, old, adv, 0.2, 0.28, dual_clip)
    np.testing.assert_allclose(loss, want, **TOL)
    np.testing.assert_allclose(ratio, np.exp(lp - old), **TOL)
    agree = np.asarray(clipped) == want_clip
    edges = [0.8, 1.28] + ([dual_clip] if dual_clip else [])
    near = np.min([np.abs(np.exp(lp - old) - e) for e in edges], axis=0) < 1e-5  # fp32 ties at the edges
    assert np.all(agree | near)
    if dual_clip:
        assert np.any((adv < 0) & (np.exp(lp - old) > dual_clip)), "the case never hit the dual clip"


def test_clip_higher_is_asymmetric():
    adv = np.ones(3, np.float32)
    old = np.zeros(3, np.float32)
    lp = np.log(np.array([1.25, 1.30, 0.7], np.float32))  # inside eps_high, beyond it, below 1 - eps_low
    loss, clipped, _ = rl.ppo_clip(lp, old, adv, rl.LossConfig())
    np.testing.assert_allclose(loss, [-1.25, -1.28, -0.7], **TOL)
    assert list(np.asarray(clipped)) == [False, True, False]


@pytest.mark.parametrize("clip", [None, 0.2])
def test_value_loss(clip):
    rng = np.random.default_rng(1)
    v, old, ret = rng.normal(size=(3, 3, 40))
    loss, clipped = rl.value_loss(*(x.astype(np.float32) for x in (v, old, ret)), clip)
    want = 0.5 * (v - ret) ** 2
    if clip is not None:
        vc = np.where(v - old > clip, old + clip, np.where(v - old < -clip, old - clip, v))
        want = np.where((vc - ret) ** 2 > (v - ret) ** 2, 0.5 * (vc - ret) ** 2, want)
        assert np.asarray(clipped).any()
    np.testing.assert_allclose(loss, want, **TOL)


def test_kl_estimators_values():
    rng = np.random.default_rng(2)
    lp, ref = rng.normal(-3, 1, (2, 2, 30))
    x = ref - lp
    np.testing.assert_allclose(rl.kl_k1(lp, ref), lp - ref, **TOL)
    np.testing.assert_allclose(rl.kl_k2(lp, ref), 0.5 * x**2, **TOL)
    np.testing.assert_allclose(rl.kl_k3(lp, ref), np.exp(x) - x - 1, **TOL)
    assert np.all(np.asarray(rl.kl_k3(lp, ref)) >= 0)


def test_kl_estimators_unbiased_values_and_k3_gradient_is_reverse_kl():
    """Exact expectations over a categorical: E_pi[k1] = E_pi[k3] = KL(pi||ref); the k3 loss's gradient
    is grad KL(ref||pi), not grad KL(pi||ref); k1 as a (detached) reward gives grad KL(pi||ref)."""
    theta = jnp.array([0.3, -1.0, 0.8, 0.1, -0.4])
    ref = jax.nn.log_softmax(jnp.array([-0.2, 0.5, 0.0, 1.0, -1.0]))
    lpi = lambda th: jax.nn.log_softmax(th)
    pi = jnp.exp(lpi(theta))
    kl_fwd = lambda th: jnp.sum(jnp.exp(lpi(th)) * (lpi(th) - ref))
    kl_rev = lambda th: jnp.sum(jnp.exp(ref) * (ref - lpi(th)))
    np.testing.assert_allclose(jnp.sum(pi * rl.kl_k1(lpi(theta), ref)), kl_fwd(theta), rtol=1e-6)
    np.testing.assert_allclose(jnp.sum(pi * rl.kl_k3(lpi(theta), ref)), kl_fwd(theta), rtol=1e-6)
    # As a loss on samples from pi (pi is the sampling distribution: not differentiated).
    g_k3 = jax.grad(lambda th: jnp.sum(jax.lax.stop_gradient(pi) * rl.kl_k3(lpi(th), ref)))(theta)
    g_k1_reward = jax.grad(lambda th: jnp.sum(jax.lax.stop_gradient(pi * (lpi(theta) - ref)) * lpi(th)))(
        theta
    )
    np.testing.assert_allclose(g_k3, jax.grad(kl_rev)(theta), atol=1e-6)
    np.testing.assert_allclose(g_k1_reward, jax.grad(kl_fwd)(theta), atol=1e-6)
    assert np.max(np.abs(g_k3 - jax.grad(kl_fwd)(theta))) > 1e-2  # k3 in the loss is biased


def np_aggregate(loss, mask, mode):
    rows = [(loss[b][mask[b] > 0]) for b in range(loss.shape[0])]
    rows = [x for x in rows if x.size]
    if mode == "token_mean":
        return np.concatenate(rows).mean()
    if mode == "seq_mean_token_mean":
        return np.mean([x.mean() for x in rows])
    return np.mean([x.sum() for x in rows])


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"])
def test_aggregations_and_micro_batch_sums(mode):
    rng = np.random.default_rng(3)
    loss = rng.normal(size=(8, 12))
    mask = (rng.random((8, 12)) < 0.5).astype(float)
    mask[3] = 0  # a row with no policy token counts nowhere
    full = float(rl.aggregate(loss, mask, mode))
    np.testing.assert_allclose(full, np_aggregate(loss, mask, mode), rtol=1e-5)
    den = rl.AGGREGATIONS.get_named(mode)[1](jnp.asarray(mask, jnp.float32))
    parts = sum(float(rl.aggregate(loss[i::4], mask[i::4], mode, den)) for i in range(4))
    np.testing.assert_allclose(parts, full, rtol=1e-5)
