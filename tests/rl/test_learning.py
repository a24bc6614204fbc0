"""Do the RL stages change the policy, and in the right direction?

* the rollout sampler of the pipeline (``Runtime.sampler``: one cached ``models.Sampler`` per bucket shape,
  weights swapped in with ``set_model``) samples with the *updated* actor after a learner update: its
  log-probs of what it draws equal a fresh forward of the learner's actor, and differ from before;
* rollout seeds and tasks differ per cursor (step), and are equal for equal cursors (so two runs of one
  config, e.g. a full run and an ablation from the same actor, draw with common random numbers);
* one update with the pipeline's own learner settings (``WarmupConfig`` / ``PPOConfig`` / demo) raises the
  log-prob of episodes with positive advantage and lowers it for negative ones (log-probs from an
  independent full forward in float64), and the step ascends the on-policy surrogate sum_t A_t log pi(a_t)
  computed on full logits (no chunking, no clipping: the first update has ratio 1);
* the learning check (``slow``): PPO with the rule judge (fusion pays) raises the share of fused plans and the
  reward within a few dozen CPU steps.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from pipeline_fixtures import SMALL_TASKS, TINY_ARCH, RuleJudge

import models
from research import rl
from research.rl import pipeline as pl
from research.rl._batch import PackConfig, pack_trajectories
from research.rl.pipeline import demo
from research.rollout import stable_seed

RO = pl.RolloutConfig(turns=1, episodes=8, group_size=2, max_context=96, seed=5)


def _toy_actor(seed=0):
    return models.init_model(models.tiny_config(**TINY_ARCH), seed=seed)


def _fresh_logprobs(model, prompt_ids, response_ids):
    """Log-probs of each response token under ``model``: an independent full forward (no KV cache)."""
    seq = list(prompt_ids) + list(response_ids)
    logits = np.asarray(model(jnp.asarray([seq], jnp.int32))[0], np.float64)
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    lp = logits - lse[:, None]
    p = len(prompt_ids)
    return np.array([lp[p - 1 + k, t] for k, t in enumerate(response_ids)])


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    cfg = pl.PipelineConfig(
        out_dir=str(tmp_path_factory.mktemp("rt")), tasks=SMALL_TASKS, judge_cache=None, progress=False
    )
    rt = pl.Runtime(cfg, judge=RuleJudge())
    yield rt
    rt.close()


def _pack(records, ro=RO):
    pack = PackConfig(max_len=ro.max_len, pad_to=ro.max_len, rows_multiple=ro.episodes, pad_id=0)
    batch, _, _ = pack_trajectories(records, rl.RewardConfig(), pack)
    return batch


@pytest.mark.slow  # ~70 s on 2 loaded cores (tests/_tiers.py)
def test_the_cached_sampler_samples_with_the_updated_actor(runtime):
    rt = runtime
    cfg = dataclasses.replace(pl.PPOConfig().learner)
    cfg.actor = dataclasses.replace(cfg.actor, lr=1e-2)  # one large step: the weights surely move
    actor = _toy_actor()
    learner = rl.Learner(cfg, actor, models.Critic.from_policy(actor, seed=1))
    sampler = rt.sampler(learner.actor_model(), RO)
    records = rt.env.rollout(sampler, RO, 0)
    traces = dict(sampler.trace_counts)
    fixed = records[0]  # a fixed sequence: its log-probs before the update
    before = _fresh_logprobs(learner.actor_model(), fixed.prompt_ids, fixed.response_ids)
    np.testing.assert_allclose(fixed.logprobs, before, atol=2e-4)  # the sampler's = a fresh forward

    planted = [
        dataclasses.replace(r, verdict={**r.verdict, "reward": (-1.0) ** i}) for i, r in enumerate(records)
    ]
    learner.ppo_step(_pack(planted))  # rewards planted +-1: a random actor writes no valid plan

    again = rt.sampler(learner.actor_model(), RO)
    assert again is sampler  # the cached sampler, weights swapped in ...
    assert sampler.trace_counts == traces  # ... without a recompile
    after = _fresh_logprobs(learner.actor_model(), fixed.prompt_ids, fixed.response_ids)
    assert np.max(np.abs(after - before)) > 1e-2  # the update moved the policy on this sequence
    # What the cached sampler draws now is drawn by the updated actor: its log-probs of its own samples
    # equal a fresh forward of the updated actor (and not of the old one).
    new = rt.env.rollout(sampler, RO, 0)
    for r in new:
        want = _fresh_logprobs(learner.actor_model(), r.prompt_ids, r.response_ids)
        np.testing.assert_allclose(r.logprobs, want, atol=2e-4)
    old = _fresh_logprobs(actor, new[0].prompt_ids, new[0].response_ids)
    assert np.max(np.abs(np.asarray(new[0].logprobs) - old)) > 1e-2
    # ... and set_model on the Sampler itself swaps what generate uses (back to the original actor here).
    sampler.set_model(actor)
    back = rt.env.rollout(sampler, RO, 0)
    assert [r.response_ids for r in back] == [r.response_ids for r in records]
    np.testing.assert_allclose(back[0].logprobs, records[0].logprobs, atol=1e-5)


def test_rollout_seeds_and_tasks_differ_per_cursor_and_repeat_for_equal_cursors(runtime):
    rt = runtime
    sampler = rt.sampler(_toy_actor(seed=2), RO)
    seeds = {stable_seed(RO.seed, c, 0, 0) for c in range(50)}
    assert len(seeds) == 50
    assert stable_seed(1, 0, 0, 0) != stable_seed(2, 0, 0, 0)
    draws = [tuple(t.id for t in rt.env.draw(RO, c)) for c in range(6)]
    assert len(set(draws)) > 1
    a, b, c = (rt.env.rollout(sampler, RO, k) for k in (0, 0, 1))
    assert [r.response_ids for r in a] == [r.response_ids for r in b]  # deterministic per cursor
    assert [r.response_ids for r in a] != [r.response_ids for r in c]
    # The stage's batch source advances the cursor every step (so each step samples afresh).
    from research.rl.pipeline.stages import _rollout_source

    actor = _toy_actor(seed=2)
    learner = rl.Learner(pl.WarmupConfig().learner, actor, models.Critic.from_policy(actor, seed=1))
    box: dict = {}
    source = _rollout_source(rt, learner, RO, box)
    _, nxt, _ = source(0)
    _, nxt2, _ = source(nxt)
    assert (nxt, nxt2) == (1, 2) and box["cursor"] == 2


def _planted_batch(seed=0):
    """Random single-turn episodes on the toy vocabulary with advantages +1 / -1 planted per row (GRPO of
    rewards 1 and -1 in groups of two: the whitened score), tokens distinct enough to be scored alone."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(8):
        prompt = [1] + rng.integers(4, 60, 5).tolist() + [3]
        response = rng.integers(4, 60, 6).tolist() + [2]
        records.append(
            {
                "prompt_ids": prompt,
                "response_ids": response,
                "response_mask": [1] * len(response),
                "logprobs": [0.0] * len(response),
                "reward": 1.0 if i % 2 == 0 else -1.0,
                "group": i // 2,
            }
        )
    pack = PackConfig(max_len=16, pad_to=16, rows_multiple=8, pad_id=0)
    batch, _, _ = pack_trajectories(records, rl.RewardConfig(), pack)
    return batch, records


@pytest.mark.parametrize(
    "name,learner",
    [
        ("warmup", pl.WarmupConfig().learner),
        ("ppo", pl.PPOConfig().learner),
        ("demo_warmup", demo.demo_pipeline("/tmp/x", "c.jsonl").warmup.learner),
        ("demo_ppo", demo.demo_pipeline("/tmp/x", "c.jsonl").ppo.learner),
    ],
)
@pytest.mark.slow  # ~76 s on 2 loaded cores (tests/_tiers.py)
def test_one_update_moves_log_probs_in_the_direction_of_the_advantage(name, learner):
    """Through the pipeline's learner settings, GRPO advantages (critic-free, so the sign of each row's
    advantage is known exactly): after one ``ppo_step`` rows of positive advantage gain log-prob, rows of
    negative advantage lose it, and the step taken has a positive inner product (float64) with the gradient
    of the on-policy surrogate computed on an independent full-logits path."""
    cfg = dataclasses.replace(learner, advantage=dataclasses.replace(learner.advantage, estimator="grpo"))
    cfg.actor = dataclasses.replace(cfg.actor, lr=1e-3)  # direction, not size: a step visible at fp32
    cfg.loss = dataclasses.replace(cfg.loss, entropy_coef=0.0)
    batch, records = _planted_batch()
    actor = _toy_actor(seed=4)
    # With a KL penalty (the demo's), the reference is the starting policy, as the stages give it.
    reference = _toy_actor(seed=4) if cfg.loss.kl_penalty != "none" else None
    learner_ = rl.Learner(cfg, actor, None, reference)
    prepared, _ = learner_.prepare(batch)
    adv = np.asarray(prepared.advantages)
    m = np.asarray(batch.response_mask) > 0
    # GRPO of rewards (1, -1) per group: (r - mean) / std = +-1/sqrt(2) on every policy token
    np.testing.assert_allclose(np.abs(adv[m]), 1 / np.sqrt(2), rtol=1e-4)
    for i, r in enumerate(records):
        assert np.all(np.sign(adv[i][m[i]]) == np.sign(r["reward"]))
    graphdef, p0 = nnx.split(actor)
    before = [_fresh_logprobs(actor, r["prompt_ids"], r["response_ids"]) for r in records]
    learner_.ppo_step(batch)
    after = [_fresh_logprobs(learner_.actor_model(), r["prompt_ids"], r["response_ids"]) for r in records]
    gain = np.array([(a - b).sum() for a, b in zip(after, before)])
    pos, neg = gain[0::2], gain[1::2]
    assert np.all(pos > 0), (name, gain)
    assert np.all(neg < 0), (name, gain)
    assert pos.mean() > 1e-3 and neg.mean() < -1e-3

    # The direction: d/dtheta of sum_t A_t log pi(a_t) (the on-policy PPO gradient up to its positive
    # normaliser; ratio 1, so no clipping) on full logits, against the step taken (float64 inner product).
    delta = jax.tree.map(
        lambda a, b: np.asarray(a, np.float64) - np.asarray(b, np.float64),
        nnx.split(learner_.actor_model())[1],
        p0,
    )
    tokens = jnp.asarray(batch.tokens)
    advj = jnp.asarray(np.where(m, adv, 0.0))

    def surrogate(p):
        logits = nnx.merge(graphdef, p)(tokens)[:, :-1]
        lp = jnp.take_along_axis(jax.nn.log_softmax(logits, -1), tokens[:, 1:, None], -1)[..., 0]
        return (lp * advj[:, 1:]).sum()

    g = jax.grad(surrogate)(p0)
    inner = sum(
        float(np.sum(np.asarray(a, np.float64) * b))
        for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(delta))
    )
    assert inner > 0


def test_demo_trains_against_eager_with_several_updates_per_batch():
    """The GPU demo's training judge times against eager (tier 2, what the corpus's slow tiles miss; the
    held-out evaluations keep compile) and its RL learners take more than one update per batch (PPO's ratio
    and clip act), each batch split evenly into mini-batches, in small steps held near the stage's starting
    policy (lr <= 5e-5, a KL penalty, no entropy bonus: larger steps spread the rewarded tile tokens into
    positions where they are invalid, docs/results/toy_rl_gpu.md fourth run), with Monte-Carlo
    advantages in the warm-up (its critic is fresh)."""
    judge = demo.fast_judge()
    assert judge.baselines == ["eager"]
    assert judge.reward == "cuda_agent"
    cfg = demo.demo_pipeline("/tmp/x", "c.jsonl")
    for stage in (cfg.warmup, cfg.ppo):
        lc = stage.learner
        assert lc.epochs * lc.minibatches > 1
        assert stage.rollout.episodes % (lc.minibatches * lc.micro_batches) == 0
        assert lc.actor.lr <= 5e-5 and lc.loss.kl_penalty == "k3_loss" and lc.loss.kl_coef > 0
        assert lc.loss.entropy_coef == 0.0
    assert cfg.warmup.learner.advantage.lam == 1.0 and cfg.ppo.learner.advantage.lam == 0.95
    assert demo.full_judge().baselines == ["eager", "compile"]


def test_demo_pretrains_with_grammar_smoothing_and_takes_warmup_overrides(tmp_path):
    """The demo's pretraining gives legal, never-seen moves probability (grammar-aware smoothing; without it
    no optimisation absent from the corpus is ever sampled) and its judge shares the GPU between two run
    workers; ``--warmup-steps`` / ``--warmup-lr`` change the full run's warm-up and nothing else."""
    cfg = demo.demo_pipeline("/tmp/x", "c.jsonl")
    assert 0 < cfg.pretrain.grammar_smoothing < 0.5 and cfg.pretrain.label_smoothing == 0.0
    assert cfg.sandbox.run_workers_per_gpu == 2 and cfg.sandbox.exclusive_timing
    same = demo.full_config(demo.DemoConfig(work=str(tmp_path)))
    assert same.out_dir == str(tmp_path / "full") and same.warmup.steps == cfg.warmup.steps
    dc = demo.DemoConfig(work=str(tmp_path), warmup_steps=12, warmup_lr=1e-4)
    got = demo.full_config(dc)
    assert got.warmup.steps == 12 and got.warmup.learner.actor.lr == 1e-4
    assert got.ppo == same.ppo and got.pretrain == same.pretrain and got.rft == same.rft
    assert got.warmup.learner.critic == same.warmup.learner.critic
    assert cfg.warmup.learner.actor.lr == 5e-5  # demo_pipeline itself untouched
