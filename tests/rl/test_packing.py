"""Sequence packing and token-budget micro-batches in the learner (tiny fp32 models).

A packed batch must be the padded batch in another layout: the same per-token log-probs (each trajectory
run alone), values, advantages and returns (GAE, group baselines and turn tables never cross a
trajectory), losses, metrics and gradients, for PPO with a critic, RFT and value pretraining. Token-budget
micro-batches must give the full batch's gradients and update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from rl_fixtures import tiny_models

from research import rl
from research.rl import _update
from research.rl._packing import first_fit_decreasing


def _records():
    """Multi-turn trajectories of varied lengths, three groups of two (the lengths differ within groups)."""
    rng = np.random.default_rng(7)
    shapes = [(8, 6, 3, 2), (3, 2, 2, 3), (6, 5, 2, 1), (4, 3, 3, 2), (2, 6, 1, 2), (5, 2, 4, 1)]
    recs = []
    for j, (prompt, turn, obs, turns) in enumerate(shapes):
        rec = rl.synthetic_record(rng, 128, prompt, turn, obs, turns, group=j // 2)
        rec["logprobs"] = (np.asarray(rec["logprobs"]) + rng.normal(0, 0.3, len(rec["logprobs"]))).tolist()
        recs.append(rec)
    return recs


def _both(records, **kw):
    """(padded, packed) batches of the same records; packed rows of 24 tokens hold 2 or 3 trajectories."""
    padded, d1, k1 = rl.pack_trajectories(
        records, rl.RewardConfig(), rl.PackConfig(max_len=24, pad_to=8, **kw)
    )
    packed, d2, k2 = rl.pack_trajectories(
        records, rl.RewardConfig(), rl.PackConfig(max_len=24, pad_to=8, packing=True, **kw)
    )
    assert k1 == k2 and d1.as_metrics() == d2.as_metrics()
    return padded, packed


def _unpack(x, layout, fill=0.0):
    """Packed [B, T] -> [S, L] in numpy (independent of research.rl._packing.unpack)."""
    flat = np.append(np.asarray(x, np.float64).reshape(-1), fill)
    return flat[np.asarray(layout.index)]


def _rows(x, layout):
    """The padded batch's first S rows, first L columns (the same trajectories' padded layout)."""
    s, length = np.asarray(layout.index).shape
    return np.asarray(x, np.float64)[:s, :length]


def _max_abs(a, b):
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(a, b))


def test_first_fit_decreasing_places_each_item_once():
    assert first_fit_decreasing([5, 4, 3, 3, 2, 1], 8) == [[0, 2], [1, 3, 5], [4]]  # worked by hand


def test_packing_round_trip_and_too_long_dropped():
    records = _records()
    long = rl.synthetic_record(np.random.default_rng(0), 128, 10, 8, 2, 2, group=9)  # 28 tokens > 24
    records = records[:3] + [long] + records[3:]
    batch, drops, kept = rl.pack_trajectories(
        records, rl.RewardConfig(), rl.PackConfig(max_len=24, pad_to=8, packing=True, rows_multiple=2)
    )
    assert drops["too_long"] == 1 and kept == [0, 1, 2, 4, 5, 6]
    lay = batch.segments
    index = np.asarray(lay.index)
    b, t = batch.tokens.shape
    assert b % 2 == 0 and t <= 24
    real = index[index < b * t]
    assert len(np.unique(real)) == len(real)  # every token lands once...
    assert set(real.tolist()) == set(np.flatnonzero(np.asarray(batch.segment_ids).reshape(-1) > 0).tolist())
    mask = _unpack(batch.response_mask, lay)
    for s, i in enumerate(kept):
        rec = records[i]
        ids = rec["prompt_ids"] + rec["response_ids"]
        n = len(ids)
        np.testing.assert_array_equal(_unpack(batch.tokens, lay)[s, :n], ids)  # ...where it belongs
        np.testing.assert_array_equal(mask[s, len(rec["prompt_ids"]) : n], rec["response_mask"])
        np.testing.assert_array_equal(_unpack(batch.positions, lay)[s, :n], np.arange(n))
        assert len(np.unique(_unpack(batch.segment_ids, lay)[s, :n])) == 1
    # Every policy token exactly once: the packed mask holds as many as the records.
    assert batch.response_mask.sum() == sum(sum(records[i]["response_mask"]) for i in kept)
    assert np.asarray(lay.group_ids).tolist() == [0, 0, 1, 1, 2, 2]
    assert b < len(kept)  # several trajectories per row


@pytest.mark.parametrize("estimator", ["gae", "grpo", "rloo", "trloo"])
def test_packed_advantages_stay_per_trajectory(estimator):
    """Fast variant of the learner tests' advantage check: the same values and rewards in both layouts
    give the same advantages and returns; the estimator run on the packed rows as they are would not."""
    padded, packed = _both(_records())
    lay = packed.segments
    s, length = np.asarray(lay.index).shape
    vals = np.random.default_rng(3).normal(size=(s, length)).astype(np.float32)
    v_pad = np.zeros(padded.tokens.shape, np.float32)
    v_pad[:s, :length] = vals
    v_pack = np.zeros(packed.tokens.size + 1, np.float32)
    v_pack[np.asarray(lay.index)] = vals
    v_pack = v_pack[:-1].reshape(packed.tokens.shape)
    cfg = rl.LearnerConfig(advantage=rl.AdvantageConfig(estimator=estimator))
    args = lambda b, v: (b.token_rewards, v, b.response_mask, b.token_discounts, b.turn_ids)
    adv_a, ret_a = rl.compute_advantages(*args(padded, v_pad), padded.group_ids, cfg.advantage)
    pk = jax.tree.map(jnp.asarray, packed)
    adv_b, ret_b = _update._advantages(pk, pk.token_rewards, jnp.asarray(v_pack), pk.response_mask, cfg)
    m = _rows(padded.response_mask, lay)
    for a, b in ((adv_a, adv_b), (ret_a, ret_b)):
        assert np.max(np.abs(_rows(a, lay) - _unpack(b, lay) * m)) < 1e-5
    assert np.abs(_rows(adv_a, lay)).max() > 0.1
    naive, _ = rl.compute_advantages(*args(packed, v_pack), packed.group_ids, cfg.advantage)
    assert np.max(np.abs(_rows(adv_a, lay) - _unpack(naive, lay) * m)) > 1e-2  # rows mix trajectories


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum"])
def test_segment_aggregations_count_trajectories(aggregation):
    """The loss aggregation over a packed batch's segments equals the padded batch's over rows."""
    padded, packed = _both(_records())
    lay = packed.segments
    s, length = np.asarray(lay.index).shape
    loss = np.random.default_rng(4).normal(size=(s, length)).astype(np.float32)
    l_pad = np.zeros(padded.tokens.shape, np.float32)
    l_pad[:s, :length] = loss
    l_pack = np.zeros(packed.tokens.size + 1, np.float32)
    l_pack[np.asarray(lay.index)] = loss
    l_pack = l_pack[:-1].reshape(packed.tokens.shape)
    want = rl.aggregate(jnp.asarray(l_pad), jnp.asarray(padded.response_mask), aggregation)
    got = rl.aggregate(
        jnp.asarray(l_pack), jnp.asarray(packed.response_mask), aggregation, segment_ids=packed.segment_ids
    )
    np.testing.assert_allclose(float(got), float(want), rtol=1e-6)
    if aggregation != "token_mean":  # per row, a packed row would count as one trajectory
        rows = rl.aggregate(jnp.asarray(l_pack), jnp.asarray(packed.response_mask), aggregation)
        assert abs(float(rows) - float(want)) > 1e-3


def test_pad_fraction_of_both_layouts():
    """The learner's ``batch/pad_fraction``: token slots that hold no trajectory token."""
    from research.rl._learner import _layout_metrics

    padded, packed = _both(_records())
    tokens = sum(len(r["prompt_ids"]) + len(r["response_ids"]) for r in _records())
    for batch in (padded, packed):
        want = 1.0 - tokens / batch.tokens.size
        assert _layout_metrics(batch)["batch/pad_fraction"] == pytest.approx(want, abs=1e-12)
    assert _layout_metrics(packed)["batch/pad_fraction"] < _layout_metrics(padded)["batch/pad_fraction"]
    assert _layout_metrics(padded._replace(segment_ids=None)) == {}  # a batch built by hand: unknown


def test_micro_count_follows_the_token_budget():
    batch = rl.RLBatch(*(np.zeros((12, 16)),) * 7)
    count = lambda budget: _update.micro_count(batch, rl.LearnerConfig(micro_batch_tokens=budget))
    assert [count(x) for x in (16, 31, 32, 48, 100, 192, 10**6, 1)] == [12, 12, 6, 4, 2, 1, 1, 12]
    assert _update.micro_count(batch, rl.LearnerConfig(micro_batches=3)) == 3


@pytest.mark.slow  # compiles the learner for both layouts (~1 min on 2 loaded cores); fast variants above
@pytest.mark.parametrize(
    "estimator,aggregation", [("gae", "seq_mean_token_mean"), ("grpo", "seq_mean_token_sum")]
)
def test_packed_ppo_equals_padded(estimator, aggregation):
    padded, packed = _both(_records())
    actor, critic = tiny_models(seed=2)
    cfg = rl.LearnerConfig(  # the records' perturbed sampler log-probs: ratios away from 1, clipping
        loss=rl.LossConfig(aggregation=aggregation, entropy_coef=0.01),
        advantage=rl.AdvantageConfig(estimator=estimator),
        old_logprobs="sampler",
    )
    critic = critic if estimator == "gae" else None
    learner = rl.Learner(cfg, actor, critic)
    prep_a, ma = learner.prepare(padded)
    prep_b, mb = learner.prepare(packed)
    lay = packed.segments
    m = _rows(padded.response_mask, lay)
    np.testing.assert_array_equal(_unpack(packed.response_mask, lay), m)
    # Per-token log-probs and entropies: the packed forward against the padded (one trajectory a row) one.
    lp = jax.jit(lambda p, b: _update.logprobs(learner.actor_def, p, b.tokens, cfg, entropy=True,
                                               layout=_update.packed(b)))  # fmt: skip
    (lpa, ea), (lpb, eb) = lp(learner.state.actor, learner.put(padded)), lp(learner.state.actor, prep_b)
    for a, b in ((lpa, lpb), (ea, eb)):
        assert np.max(np.abs(_rows(a, lay) * m - _unpack(b, lay) * m)) < 1e-5
    seg = np.asarray(packed.segment_ids)
    starts = (seg > 0) & (seg != np.pad(seg, ((0, 0), (1, 0)))[:, :-1])  # no prefix of its own: like entry 0
    assert starts.sum() == len(np.asarray(lay.group_ids)) and not np.asarray(lpb)[starts].any()
    fields = ["advantages", "returns"] + (["values"] if critic is not None else [])
    for f in fields:  # per token, each trajectory's own: recomputed log-probs are the unpacked forward's
        a, b = _rows(getattr(prep_a, f), lay) * m, _unpack(getattr(prep_b, f), lay) * m
        assert np.max(np.abs(a - b)) < 1e-5, f
    assert np.abs(_unpack(prep_b.advantages, lay)).max() > 0.1
    for k in ma:
        np.testing.assert_allclose(mb[k], ma[k], rtol=1e-5, atol=1e-6, err_msg=k)
    ga, gca, mga = learner.gradients(prep_a)
    gb, gcb, mgb = learner.gradients(prep_b)
    assert _max_abs(jax.tree.leaves(ga), jax.tree.leaves(gb)) < 1e-5
    if critic is not None:
        assert _max_abs(jax.tree.leaves(gca), jax.tree.leaves(gcb)) < 1e-5
    assert mga["clip_frac"] > 0
    for k in mga:
        np.testing.assert_allclose(mgb[k], mga[k], rtol=1e-5, atol=1e-6, err_msg=k)


def _grads(loss, params, batch, cfg, **defs):
    dens = _update._dens(batch, cfg)
    return jax.grad(lambda p: loss(p, batch, dens, cfg=cfg, **defs), has_aux=True)(params)


@pytest.mark.slow  # compiles RFT, value and their steps for both layouts; fast variants above
def test_packed_rft_and_value_losses_equal_padded():
    padded, packed = _both(_records())
    actor, critic = tiny_models(seed=4)
    cfg = rl.LearnerConfig(loss=rl.LossConfig(aggregation="seq_mean_token_mean"))
    learner = rl.Learner(cfg, actor, critic)
    outs = []
    for batch in (padded, packed):
        prepared, _ = learner.prepare(batch)
        ga, ra = _grads(_update._rft_loss, learner.state.actor, prepared, cfg, actor_def=learner.actor_def)
        gc, va = _grads(
            _update._critic_loss, learner.state.critic, prepared, cfg, critic_def=learner.critic_def
        )
        outs.append((ga, ra, gc, va))
    (ga, ra, gc, va), (gb, rb, gcb, vb) = outs
    assert _max_abs(jax.tree.leaves(ga), jax.tree.leaves(gb)) < 1e-5
    assert _max_abs(jax.tree.leaves(gc), jax.tree.leaves(gcb)) < 1e-5
    for k in ("nll", "nll_token_mean"):
        np.testing.assert_allclose(rb[k], ra[k], rtol=1e-6)
    np.testing.assert_allclose(vb["value_loss"], va["value_loss"], rtol=1e-5)
    # The steps run on a packed batch: their metrics (taken before the update) are the padded batch's.
    step = rl.Learner(cfg, actor, critic)
    rft, value = step.rft_step(packed), step.value_step(packed)  # RFT leaves the critic as it was
    np.testing.assert_allclose(rft["nll"], ra["nll"], rtol=1e-5)
    np.testing.assert_allclose(value["value_loss"], va["value_loss"], rtol=1e-5)
    assert rft["batch/pad_fraction"] == value["batch/pad_fraction"] > 0


@pytest.mark.slow  # compiles two learners' gradients and updates; fast variant: micro_count above; the padded
# layout's accumulation is test_learner.py's (the budget only picks the count)
def test_token_budget_micro_batches_equal_full_batch():
    batch, _, _ = rl.pack_trajectories(
        _records(), rl.RewardConfig(), rl.PackConfig(max_len=24, pad_to=8, packing=True, rows_multiple=4)
    )
    b, t = batch.tokens.shape
    actor, critic = tiny_models(seed=5)
    cfg = lambda **kw: rl.LearnerConfig(loss=rl.LossConfig(aggregation="seq_mean_token_mean"), **kw)
    full, budget = rl.Learner(cfg(), actor, critic), rl.Learner(cfg(micro_batch_tokens=t), actor, critic)
    assert _update.micro_count(batch, budget.config) == b  # one row of T tokens each
    assert _update.micro_count(batch, cfg(micro_batch_tokens=2 * t + 1)) == b // 2
    prepared, _ = full.prepare(batch)
    prepared = prepared._replace(old_logprobs=prepared.old_logprobs + 0.2 * prepared.response_mask)
    ga, gc, ma = full.gradients(prepared)
    gb, gcb, mb = budget.gradients(prepared)
    assert _max_abs(jax.tree.leaves(ga), jax.tree.leaves(gb)) < 1e-5
    assert _max_abs(jax.tree.leaves(gc), jax.tree.leaves(gcb)) < 1e-5
    for k in ma:
        np.testing.assert_allclose(mb[k], ma[k], rtol=1e-5, atol=1e-7, err_msg=k)
    full.update(jax.tree.map(jnp.copy, prepared))
    budget.update(jax.tree.map(jnp.copy, prepared))
    assert _max_abs(jax.tree.leaves(full.state.actor), jax.tree.leaves(budget.state.actor)) < 1e-6
    assert _max_abs(jax.tree.leaves(full.state.critic), jax.tree.leaves(budget.state.critic)) < 1e-6


def test_token_budget_and_micro_batches_are_exclusive():
    actor, _ = tiny_models()
    with pytest.raises(ValueError, match="micro_batch_tokens"):
        rl.Learner(rl.LearnerConfig(micro_batches=2, micro_batch_tokens=64), actor)
