"""Advantage estimators vs independent float64 numpy references (loops over explicit index lists), with
observation tokens inside the response, multi-turn boundaries, per-turn discounts and hand-computed cases.

Tolerance 1e-5: the estimators run in fp32 on values of order 1 (a few hundred fp32 operations per entry)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from research import rl

TOL = dict(rtol=1e-5, atol=1e-5)


def np_gae(r, v, m, d, gamma, lam):
    adv = np.zeros(r.shape)
    for b in range(r.shape[0]):
        next_v = next_a = 0.0
        for t in reversed(np.flatnonzero(m[b]).tolist()):  # policy tokens only, observations skipped
            g = gamma * d[b, t]
            delta = r[b, t] + g * next_v - v[b, t]
            adv[b, t] = delta + g * lam * next_a
            next_v, next_a = v[b, t], adv[b, t]
    return adv, (adv + v) * m


def np_whiten(x, m):
    sel = x[m.astype(bool)]
    return (x - sel.mean()) / np.sqrt(sel.var() + 1e-6) * m


def np_scores(r, m, d):
    """Whole-trajectory return: sum_t r_t * prod of the discounts of earlier policy tokens."""
    out = np.zeros(r.shape[0])
    for b in range(r.shape[0]):
        w = 1.0
        for t in np.flatnonzero(m[b]):
            out[b] += w * r[b, t]
            w *= d[b, t]
    return out


def np_turn_returns(r, m, d, tid):
    """{(row, turn): return from the first token of that turn}."""
    out = {}
    for b in range(r.shape[0]):
        idx = np.flatnonzero(m[b])
        for k in sorted(set(tid[b, idx].tolist())):
            start = idx[tid[b, idx] == k][0]
            w, total = 1.0, 0.0
            for t in idx[idx >= start]:
                total += w * r[b, t]
                w *= d[b, t]
            out[(b, k)] = total
    return out


def random_case(seed=0, b=6, t=20):
    """Rows: prompt, then policy turns separated by observation spans; rewards on turn ends."""
    rng = np.random.default_rng(seed)
    m = np.zeros((b, t))
    tid = np.full((b, t), -1)
    r = np.zeros((b, t))
    d = np.ones((b, t))
    for row in range(b):
        pos, k = int(rng.integers(1, 4)), 0
        end = t - int(rng.integers(0, 4))
        while pos < end:
            n = int(rng.integers(1, 5))
            span = slice(pos, min(pos + n, end))
            m[row, span], tid[row, span] = 1, k
            last = min(pos + n, end) - 1
            r[row, last] = rng.normal()
            d[row, last] = rng.choice([1.0, 0.5])
            pos += n + int(rng.integers(1, 4))  # an observation span
            k += 1
    v = rng.normal(size=(b, t)) * 3  # junk on non-policy tokens: must not matter
    groups = np.array([0, 0, 0, 1, 1, 2])[:b]
    return r, v, m, d, tid, groups


def run(name, case, **cfg):
    r, v, m, d, tid, g = case
    c = rl.AdvantageConfig(estimator=name, **cfg)
    f = jax.jit(lambda *a: rl.compute_advantages(*a, c))
    adv, ret = f(
        r.astype(np.float32),
        v.astype(np.float32),
        m.astype(np.float32),
        d.astype(np.float32),
        tid.astype(np.int32),
        g.astype(np.int32),
    )
    return np.asarray(adv, np.float64), np.asarray(ret, np.float64)


def test_gae_hand_computed_across_an_observation():
    # prompt | policy policy | obs obs | policy ; reward 1 on the last token; gamma 1, lambda 0.5
    m = np.array([[0, 1, 1, 0, 0, 1]], float)
    v = np.array([[9, 0.5, 0.6, 9, 9, 0.8]])
    r = np.array([[0, 0, 0, 0, 0, 1.0]])
    case = (r, v, m, np.ones_like(r), np.array([[-1, 0, 0, -1, -1, 1]]), np.array([0]))
    adv, ret = run("gae", case, lam=0.5, whiten=False)
    # t=5: 1 - 0.8 = 0.2; t=2: 0.8 - 0.6 + 0.5 * 0.2 = 0.3; t=1: 0.6 - 0.5 + 0.5 * 0.3 = 0.25
    np.testing.assert_allclose(adv, [[0, 0.25, 0.3, 0, 0, 0.2]], **TOL)
    np.testing.assert_allclose(ret, [[0, 0.75, 0.9, 0, 0, 1.0]], **TOL)


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.9, 0.8), (1.0, 1.0), (0.99, 0.0)])
def test_gae_matches_reference(gamma, lam):
    case = random_case(1)
    r, v, m, d, _, _ = case
    adv, ret = run("gae", case, gamma=gamma, lam=lam, whiten=False)
    ref_adv, ref_ret = np_gae(r, v, m, d, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, **TOL)
    np.testing.assert_allclose(ret, ref_ret, **TOL)
    wadv, wret = run("gae", case, gamma=gamma, lam=lam, whiten=True)
    np.testing.assert_allclose(wadv, np_whiten(ref_adv, m), **TOL)
    np.testing.assert_allclose(wret, ref_ret, **TOL)  # targets are never whitened


def test_gae_lambda_one_returns_are_discounted_reward_sums():
    case = random_case(2)
    r, v, m, d, tid, _ = case
    _, ret = run("gae", case, gamma=1.0, lam=1.0, whiten=False)
    turn = np_turn_returns(r, m, d, tid)
    for (b, k), g in turn.items():  # first token of each turn: the return from there on, whatever V is
        t = np.flatnonzero((tid[b] == k) & (m[b] > 0))[0]
        np.testing.assert_allclose(ret[b, t], g, **TOL)


def test_gae_observation_tokens_change_nothing():
    """Moving the same policy tokens around observation spans of other lengths leaves GAE unchanged."""
    r = np.array([[0, 0, 0, 0, 0, 0, 0, 2.0]])
    v = np.array([[0, 0.1, 0.2, 5, 5, 5, 0.3, 0.4]])
    m = np.array([[0, 1, 1, 0, 0, 0, 1, 1]], float)
    short = (r[:, [0, 1, 2, 3, 6, 7]], v[:, [0, 1, 2, 3, 6, 7]], m[:, [0, 1, 2, 3, 6, 7]])
    a_long, _ = run("gae", (r, v, m, np.ones_like(r), np.zeros_like(r, int), np.array([0])), whiten=False)
    a_short, _ = run(
        "gae", (*short, np.ones_like(short[0]), np.zeros_like(short[0], int), np.array([0])), whiten=False
    )
    np.testing.assert_allclose(a_long[:, [1, 2, 6, 7]], a_short[:, [1, 2, 4, 5]], **TOL)
    assert np.all(a_long[:, [0, 3, 4, 5]] == 0)


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_grpo_matches_reference(norm_by_std):
    case = random_case(3)
    r, v, m, d, _, g = case
    adv, _ = run("grpo", case, norm_by_std=norm_by_std)
    s = np_scores(r, m, d)
    for b in range(len(g)):
        members = np.flatnonzero(g == g[b])
        if len(members) < 2:
            want = 0.0
        else:
            want = s[b] - s[members].mean()
            if norm_by_std:
                want /= s[members].std(ddof=1) + 1e-6
        np.testing.assert_allclose(adv[b][m[b] > 0], want, **TOL)
        assert np.all(adv[b][m[b] == 0] == 0)


def test_rloo_matches_reference_and_hand_case():
    case = random_case(4)
    r, v, m, d, _, g = case
    adv, _ = run("rloo", case)
    s = np_scores(r, m, d)
    for b in range(len(g)):
        others = [j for j in np.flatnonzero(g == g[b]) if j != b]
        want = s[b] - np.mean(s[others]) if others else 0.0
        np.testing.assert_allclose(adv[b][m[b] > 0], want, **TOL)
    # three rollouts with rewards 1, 2, 6: 1 - 4 = -3, 2 - 3.5 = -1.5, 6 - 1.5 = 4.5
    rr = np.zeros((3, 3))
    rr[:, 2] = [1, 2, 6]
    mm = np.array([[0, 1, 1]] * 3, float)
    hand = (rr, np.zeros_like(rr), mm, np.ones_like(rr), np.zeros((3, 3), int), np.zeros(3, int))
    a, _ = run("rloo", hand)
    np.testing.assert_allclose(a[:, 1], [-3, -1.5, 4.5], **TOL)


def test_trloo_matches_reference():
    case = random_case(5, b=6, t=24)
    r, v, m, d, tid, g = case
    adv, ret = run("trloo", case, max_turns=16)
    turn = np_turn_returns(r, m, d, tid)
    for (b, k), gk in turn.items():
        others = [turn[(j, k)] for j in np.flatnonzero(g == g[b]) if j != b and (j, k) in turn]
        want = gk - np.mean(others) if others else 0.0
        sel = (tid[b] == k) & (m[b] > 0)
        np.testing.assert_allclose(adv[b][sel], want, **TOL)
        np.testing.assert_allclose(ret[b][sel], gk, **TOL)
    assert np.all(adv[m == 0] == 0)


def test_trloo_hand_case_with_a_rollout_that_ended_early():
    # group of three; rollout 2 has one turn only. Final rewards (gamma 1): 1, 3, 2.
    # turn 0: returns 1, 3, 2 -> 1 - 2.5, 3 - 1.5, 2 - 2; turn 1 alive for rows 0, 1: 1 - 3, 3 - 1.
    m = np.array([[0, 1, 0, 1], [0, 1, 0, 1], [0, 1, 0, 0]], float)
    tid = np.array([[-1, 0, -1, 1], [-1, 0, -1, 1], [-1, 0, -1, -1]])
    r = np.zeros((3, 4))
    r[0, 3], r[1, 3], r[2, 1] = 1, 3, 2
    adv, _ = run("trloo", (r, np.zeros_like(r), m, np.ones_like(r), tid, np.zeros(3, int)), max_turns=4)
    np.testing.assert_allclose(adv[:, 1], [-1.5, 1.5, 0.0], **TOL)
    np.testing.assert_allclose(adv[:2, 3], [-2.0, 2.0], **TOL)


def test_registry_names_and_errors():
    from kernels_env.rules import rewards
    from research.agent import POLICIES

    # one Registry type for the project: the sandbox's rewards, the agent's policies, RL's estimators
    assert type(rl.ADVANTAGES) is type(rewards.REWARDS) is type(POLICIES)
    assert set(rl.ADVANTAGES.names()) == {"gae", "grpo", "rloo", "trloo"}
    with pytest.raises(ValueError, match="known"):
        rl.ADVANTAGES.get_named("ppo2")
    with pytest.raises(ValueError, match="advantage estimator 'gae' is already registered"):
        rl.ADVANTAGES.register("gae", None)
    with pytest.raises(ValueError, match="critic values"):
        rl.compute_advantages(
            np.zeros((1, 2)),
            None,
            np.ones((1, 2)),
            np.ones((1, 2)),
            np.zeros((1, 2), int),
            np.zeros(1, int),
            rl.AdvantageConfig(),
        )
