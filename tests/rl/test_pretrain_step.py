"""Pretraining trains through the learner's one jitted step (``Learner.actor_update``) with the learner's
optimizer (``make_optimizer``): its loss, gradients, learning rates and updated weights equal those of the
implementation it replaced (its own Optax chain and jitted step, kept below as the reference), with label
smoothing, grammar smoothing and detour labels all on."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import models
from research.rl import Learner, LearnerConfig, _update, learning_rate
from research.rl.pipeline.pretrain import PretrainConfig, _loss, _nll, encode_corpus, legal_targets, optimizer
from research.toyenv import ToyTaskConfig, corpus_plans, corpus_tasks, toy_tokenizer
from tests.rl.pipeline_fixtures import TINY_ARCH

CFG = PretrainConfig(steps=4, batch_size=4, lr=3e-3, warmup_steps=2)
CFG.label_smoothing, CFG.grammar_smoothing, CFG.detour_rate = 0.05, 0.1, 0.3


def _reference_schedule(cfg):
    warmup = min(max(cfg.warmup_steps, 1), max(cfg.steps - 1, 1))
    return optax.warmup_cosine_decay_schedule(0.0, cfg.lr, warmup, max(cfg.steps, warmup + 1), cfg.lr * 0.1)


def _reference(model, cfg, q_table):
    """The previous pretrain.py step, as it was: its optimizer, state and jitted step."""
    sched = _reference_schedule(cfg)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(sched, weight_decay=cfg.weight_decay))
    graphdef, params = nnx.split(model)
    params = jax.tree.map(jnp.copy, params)
    opt = jax.jit(tx.init)(params)

    def loss_fn(p, ids, mask, qid, labels):
        legal = q_table[qid] if cfg.grammar_smoothing > 0 else None
        model = nnx.merge(graphdef, p)
        return _nll(model, ids, mask, cfg.label_smoothing, legal, cfg.grammar_smoothing, labels)

    @jax.jit
    def step(params, opt, ids, mask, qid, labels):
        (loss, (nll, acc)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, ids, mask, qid, labels)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, {"loss": loss, "nll": nll, "token_acc": acc}

    return loss_fn, params, opt, step


def _case():
    tok = toy_tokenizer()
    tasks = corpus_tasks(ToyTaskConfig(), 6)
    pairs = corpus_plans(tasks)
    ids, mask, labels = encode_corpus(pairs, tok, CFG.seq_len, CFG.multi_turn_share, CFG.detour_rate, 0)
    qid, table = legal_targets(pairs, tok, ids, mask)
    assert (labels != ids).any() and table.shape[0] > 1  # detours and grammar targets are exercised
    rng = np.random.default_rng(0)
    batches = [
        tuple(jnp.asarray(a[idx]) for a in (ids, mask, qid, labels))
        for idx in (rng.integers(0, len(ids), CFG.batch_size) for _ in range(CFG.steps))
    ]
    model = models.init_model(models.tiny_config(**{**TINY_ARCH, "vocab_size": len(tok.vocab)}), seed=0)
    return model, jnp.asarray(table), batches


def _close(a, b, **tol):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), **tol)


def test_the_learning_rates_are_the_previous_schedule():
    for cfg in (CFG, PretrainConfig(steps=1), PretrainConfig(steps=40, warmup_steps=0), PretrainConfig()):
        sched = _reference_schedule(cfg)
        ours = learning_rate(optimizer(cfg))
        w, n = optimizer(cfg).warmup_steps, cfg.steps
        for t in sorted({0, 1, w - 1, w, w + 1, n // 2, n - 1, n, n + 2}):
            np.testing.assert_allclose(float(ours(t)), float(sched(t)), rtol=1e-6, atol=1e-12)


def test_loss_and_gradients_equal_the_previous_step():
    model, table, batches = _case()
    loss_fn, params, _, _ = _reference(model, CFG, table)
    (want_loss, _), want_grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(params, *batches[0])
    learner = Learner(LearnerConfig(actor=optimizer(CFG)), actor=model)
    # plain SGD at rate 1: the step's parameter change is minus its gradient
    sgd = functools.partial(
        _update.actor_update,
        loss_fn=functools.partial(_loss, cfg=CFG, q_table=table),
        actor_def=learner.actor_def,
        actor_tx=optax.sgd(1.0),
    )
    new_state, metrics = jax.jit(sgd)(learner.state, batches[0])
    np.testing.assert_allclose(float(metrics["loss"]), float(want_loss), rtol=1e-6)
    grads = jax.tree.map(lambda a, b: a - b, learner.state.actor, new_state.actor)
    _close(grads, want_grads, rtol=1e-5, atol=1e-7)


@pytest.mark.slow  # two compiled steps (~20 s on 2 loaded cores); the gradient test is its fast variant
def test_the_learner_steps_equal_the_previous_steps():
    model, table, batches = _case()
    _, params, opt, step = _reference(model, CFG, table)
    learner = Learner(LearnerConfig(actor=optimizer(CFG), seed=CFG.seed), actor=model)
    loss_fn = functools.partial(_loss, cfg=CFG, q_table=table)
    for batch in batches:
        params, opt, want = step(params, opt, *batch)
        got = learner.actor_update(loss_fn, batch)
        assert set(got) == set(want)
        for k in want:
            np.testing.assert_allclose(float(got[k]), float(want[k]), rtol=1e-5, err_msg=k)
    _close(learner.state.actor, params, rtol=1e-5, atol=1e-6)
