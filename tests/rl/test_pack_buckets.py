"""Packing as the staged pipeline runs it (``packing=true``): batches of bucketed shapes
(``PackConfig.capacity``: T = L = max_len, B = rows_multiple x a power of two, a segment table of
``capacity`` rows) whose padding rows and padding trajectories change no loss, metric or gradient of the
padded layout (the reference), and which do not recompile the learner's jitted steps from batch to batch."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import numpy as np
import pytest
from rl_fixtures import tiny_models

from research import rl
from research.rl.pipeline import stages
from research.rl.pipeline.manifest import config_hash

MAX_LEN, CAPACITY = 24, 8  # a rollout's max_len and episodes (the padded layout: [8, 24])


def _records(shapes, seed=7):
    """Multi-turn trajectories of (prompt, turn, obs, turns) tokens, groups of two; perturbed sampler
    log-probs (ratios away from 1: clipping)."""
    rng = np.random.default_rng(seed)
    recs = []
    for j, shape in enumerate(shapes):
        rec = rl.synthetic_record(rng, 128, *shape, group=j // 2)
        rec["logprobs"] = (np.asarray(rec["logprobs"]) + rng.normal(0, 0.3, len(rec["logprobs"]))).tolist()
        recs.append(rec)
    return recs


# 23, 13, 11, 13 and 7 tokens: first-fit decreasing in rows of 24 gives [23], [13, 11], [13, 7]
SHAPES = [(8, 6, 3, 2), (3, 2, 2, 3), (6, 5, 2, 1), (4, 3, 3, 2), (5, 2, 4, 1)]


def _padded(records):
    """The pipeline's padded layout (stages._pack with packing off): one [CAPACITY, MAX_LEN] shape."""
    cfg = rl.PackConfig(max_len=MAX_LEN, pad_to=MAX_LEN, rows_multiple=CAPACITY)
    return rl.pack_trajectories(records, rl.RewardConfig(), cfg)[0]


def _bucketed(records, rows_multiple=2):
    cfg = rl.PackConfig(
        max_len=MAX_LEN, pad_to=MAX_LEN, rows_multiple=rows_multiple, packing=True, capacity=CAPACITY
    )
    return rl.pack_trajectories(records, rl.RewardConfig(), cfg)[0]


def _tokens(records):
    return sum(len(r["prompt_ids"]) + len(r["response_ids"]) for r in records)


def test_rows_round_up_to_a_bucket_and_padding_holds_nothing():
    """B: rows_multiple x the least power of two, capped at the capacity's rows (worked by hand)."""
    from research.rl._packing import bucket_rows

    assert [bucket_rows(n, 2, 16) for n in (1, 2, 3, 4, 5, 8, 9, 16)] == [2, 2, 4, 4, 8, 8, 16, 16]
    assert [bucket_rows(n, 3, 10) for n in (1, 3, 4, 7, 10)] == [3, 3, 6, 12, 12]  # cap: 10 -> 12
    records = _records(SHAPES)
    batch = _bucketed(records)
    b, t = batch.tokens.shape
    assert (b, t) == (4, MAX_LEN) and np.asarray(batch.segments.index).shape == (CAPACITY, MAX_LEN)
    seg = np.asarray(batch.segment_ids)
    used = (seg > 0).any(axis=1)
    assert used.sum() == 3 and not used[3:].any()  # 3 packed rows (SHAPES) in a bucket of 4: 1 padding
    assert np.count_nonzero(seg) == _tokens(records)
    assert batch.response_mask[~used].sum() == 0 and (np.asarray(batch.tokens)[~used] == 0).all()
    index = np.asarray(batch.segments.index)
    assert (index[len(records) :] == b * t).all()  # padding trajectories: no token
    groups = np.asarray(batch.segments.group_ids)
    assert groups.tolist() == [0, 0, 1, 1, 2, 3, 4, 5]  # padding trajectories: groups of their own
    with pytest.raises(ValueError, match="capacity of 8"):
        _bucketed(_records(SHAPES + SHAPES[:4]))


@pytest.fixture(scope="module")
def learners():
    """Two learners of the same weights (PPO with a critic, clipping, an entropy bonus, seq-mean
    aggregation: every metric's denominator counts trajectories or tokens)."""
    actor, critic = tiny_models(seed=2)
    cfg = rl.LearnerConfig(
        loss=rl.LossConfig(aggregation="seq_mean_token_mean", entropy_coef=0.01),
        advantage=rl.AdvantageConfig(estimator="gae"),
        old_logprobs="sampler",
        actor=rl.OptimConfig(lr=1e-3),
        critic=rl.OptimConfig(lr=1e-3),
    )
    return rl.Learner(cfg, actor, critic), rl.Learner(cfg, actor, critic)


@pytest.mark.slow  # compiles the learner for both layouts (~30 s on 2 loaded cores); fast variants: the
# layout test above and the next one (the packed layout's equality itself: test_packing.py)
def test_bucketed_ppo_step_equals_padded(learners):
    records = _records(SHAPES)
    padded, packed = _padded(records), _bucketed(records)
    assert packed.tokens.shape[0] < padded.tokens.shape[0]
    ref, got = learners
    # The value stage's Monte-Carlo explained variance (before any update: both learners' weights equal)
    # runs per trajectory in a packed batch: a row's cumulative rewards must not cross into the next one.
    ev_ref = stages._mc_explained_variance(ref, [padded])
    ev_got = stages._mc_explained_variance(got, [packed])
    assert ev_ref is not None and ev_got == pytest.approx(ev_ref, abs=1e-5)
    ma, mb = ref.ppo_step(padded), got.ppo_step(packed)
    assert set(ma) == set(mb)
    assert ma["clip_frac"] > 0 and ma["actor_grad_norm"] > 0 and ma["critic_grad_norm"] > 0
    for k in ma:
        if k != "batch/pad_fraction":
            np.testing.assert_allclose(mb[k], ma[k], rtol=1e-5, atol=1e-6, err_msg=k)
    # Padding rows are padding: the fraction of token slots that hold no trajectory token, from the records.
    assert ma["batch/pad_fraction"] == pytest.approx(1 - _tokens(records) / (CAPACITY * MAX_LEN), abs=1e-12)
    assert mb["batch/pad_fraction"] == pytest.approx(1 - _tokens(records) / (4 * MAX_LEN), abs=1e-12)
    for a, b in ((ref.state.actor, got.state.actor), (ref.state.critic, got.state.critic)):
        diff = max(float(np.max(np.abs(x - y))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
        assert diff < 1e-5


def _one_bucket():
    """5, 6 and 7 trajectories of 67, 82 and 82 tokens: 3, 4 and 4 rows of 24, one bucket of 4 rows."""
    sets = [SHAPES, SHAPES + [(2, 6, 1, 2)], [(2, 3, 2, 2)] * 3 + SHAPES[2:4] + [(9, 5, 1, 2), (4, 4, 4, 1)]]
    return [_bucketed(_records(s, seed=i)) for i, s in enumerate(sets)]


def test_batches_of_different_sizes_share_one_bucket():
    batches = _one_bucket()
    real = [int((np.asarray(b.segments.index) < b.tokens.size).any(1).sum()) for b in batches]
    assert real == [5, 6, 7]  # different numbers of trajectories...
    shapes = {(b.tokens.shape, np.asarray(b.segments.index).shape) for b in batches}
    assert shapes == {((4, MAX_LEN), (CAPACITY, MAX_LEN))}  # ...in one bucket


@pytest.mark.slow  # compiles the learner (~15 s on 2 loaded cores); fast variant: the test above (one shape)
def test_batches_of_one_bucket_do_not_recompile(learners):
    """Different trajectory counts and lengths, one bucket: the jitted prepare and update compile once."""
    learner, batches = learners[1], _one_bucket()
    sizes = lambda: (learner._prepare._cache_size(), learner._ppo._cache_size())
    learner.ppo_step(batches[0])  # compiled already by the bucketed-vs-padded test (the same bucket), or now
    assert sizes() == (1, 1)  # the counter counts: one compiled shape each
    for b in batches[1:]:
        learner.ppo_step(b)
    assert sizes() == (1, 1)


def _runtime(packing, mesh=None):
    cfg = SimpleNamespace(packing=packing, reward=rl.RewardConfig())
    return SimpleNamespace(cfg=cfg, pad_id=0, mesh=mesh)


def test_pipeline_pack_switch_and_hash():
    """stages._pack: off, the padded [rows, max_len] layout as before; on, a bucket of the learner's
    mini- x micro-batches x row shards; the stage hash changes only when packing is on."""
    records = _records(SHAPES)
    lc = rl.LearnerConfig(minibatches=2, micro_batches=3)
    off, _, _ = stages._pack(_runtime(False), records, MAX_LEN, CAPACITY, 3, lc)
    assert off.positions is None and off.tokens.shape == (CAPACITY, MAX_LEN)
    np.testing.assert_array_equal(off.tokens, _padded(records).tokens)
    on, _, _ = stages._pack(_runtime(True), records, MAX_LEN, CAPACITY, 3, lc)
    assert on.positions is not None and on.tokens.shape == (6, MAX_LEN)  # 3 rows -> 6 (a multiple of 2 x 3)
    mesh = SimpleNamespace(shape={"data": 2, "fsdp": 2, "tensor": 1})
    assert stages.packing_rows(rl.LearnerConfig(minibatches=2), mesh) == 8
    key = {"stage": lc}
    assert stages._stage_key(_runtime(False), key) is key  # off: hashes of existing runs unchanged
    assert config_hash(stages._stage_key(_runtime(True), key)) != config_hash(key)
