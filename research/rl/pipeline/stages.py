"""The four stages of CUDA Agent (cuda_agent.md section 4) and pretraining, each a function of the shared
``Runtime`` and the previous stage's ``Manifest``, returning its own manifest:

0. ``run_pretrain`` (toy environment): the policy from scratch on the corpus (the base model's stand-in);
   ``run_init`` (agent environment): the model of ``cfg.model``, a local Hugging Face checkpoint (used in
   place, nothing copied) or a random init saved once;
1. ``run_warmup``: single-turn PPO (actor + critic initialised from the actor);
2. ``run_rft``: multi-turn trajectories of the stage-1 policy, ``filters.rft_filter``, NLL on the policy
   tokens of the kept ones (``Learner.rft_step``); every sampled trajectory is saved for stage 3;
3. ``run_value``: a critic initialised from the RFT actor trained towards GAE targets on those
   trajectories (policy frozen), explained variance before and after;
4. ``run_ppo``: multi-turn PPO from the RFT actor and the pretrained critic (a fresh critic when value
   pretraining is off; none for critic-free estimators such as GRPO).

Every learner stage runs through ``research.rl.train`` (metrics JSONL + TensorBoard + curves, checkpoints,
exact resume) under ``<out_dir>/<stage>/`` (``_stage_common.py``: the directory, evaluation, learner run and
manifest every stage shares). A stage whose manifest exists with the same config hash is
skipped. When the time budget runs out a stage checkpoints the steps it finished and says so
(``extra.truncated``). Several JAX processes run every stage together (``out_dir`` on a filesystem they
all see): rollouts split across them (``shares.py``), one global batch, Orbax checkpoints written by all,
the run's other files (manifests, trajectories, evaluations) by process 0 before any process reads them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path

import jax
import numpy as np

import models
from research.rollout import read_trajectories, write_trajectories

from .._batch import PackConfig, pack_trajectories
from .._distributed import is_primary, sync, to_host
from .._learner import Learner
from .._update import explained_variance
from ._stage_common import cycle, evaluate_stage, learner_stage, stage_dir, stage_manifest
from .config import CRITIC_FREE
from .filters import rft_filter
from .manifest import Manifest, config_hash
from .overlap import OverlappedSource
from .pretrain import pretrain
from .rollout_metrics import rollout_metrics
from .runtime import Runtime, build_policy
from .sft import demo_trajectories, demos_path, sft_batches


def _pack(rt: Runtime, records, max_len: int, rows: int, max_turns: int = 64, learner=None):
    """``rows`` trajectories at most, in one [rows, max_len] shape (padded layout), or with ``packing`` in
    rows of max_len whose count is a bucket of ``packing_rows`` (``learner``: the stage's LearnerConfig)."""
    cfg = PackConfig(
        max_len=max_len, pad_to=max_len, rows_multiple=rows, pad_id=rt.pad_id, max_turns=max_turns
    )
    if rt.cfg.packing:
        cfg = dataclasses.replace(
            cfg, packing=True, capacity=rows, rows_multiple=packing_rows(learner, rt.mesh)
        )
    return pack_trajectories(records, rt.cfg.reward, cfg)


def packing_rows(learner, mesh) -> int:
    """What a packed batch's rows must be a multiple of: the learner's mini- x micro-batches x the mesh's
    row shards (a token budget's micro-batch count follows B, any B)."""
    shards = 1 if mesh is None else mesh.shape["data"] * mesh.shape["fsdp"]
    return learner.minibatches * learner.micro_batches * shards


def _stage_key(rt: Runtime, key: dict) -> dict:
    """A stage's hash key; packing enters it only when on (off: the hash, and the stages it finds done,
    as before the switch existed)."""
    return {**key, "packing": True} if rt.cfg.packing else key


# --- stage 0 ---------------------------------------------------------------------------------------------
def run_pretrain(rt: Runtime) -> Manifest:
    c = rt.cfg
    h = config_hash({"model": c.model, "pretrain": c.pretrain, "corpus": c.corpus, "tasks": c.tasks})
    d = stage_dir(rt, "pretrain")
    if (m := Manifest.find(d, h)) is not None:
        return m
    model = build_policy(c.model, len(rt.tokenizer))
    t0 = time.perf_counter()
    model, last = pretrain(
        model,
        rt.corpus_tasks(),
        c.pretrain,
        d,
        corpus=c.corpus,
        tokenizer=rt.tokenizer,
        deadline=rt.deadline,
        progress=c.progress,
        mesh=rt.mesh,
    )
    actor = models.save_checkpoint(d / "actor", model)
    metrics = {**last, "time_s": time.perf_counter() - t0}
    ev = evaluate_stage(rt, "pretrain", model, c.warmup.rollout)
    if ev:
        metrics["eval"] = ev
    m = Manifest(
        "pretrain",
        str(actor),
        None,
        int(last.get("step", 0)),
        h,
        metrics,
        extra={"params": model.config.num_params()},
    )
    m.save(d)
    return m


def run_init(rt: Runtime) -> Manifest:
    """Stage 0 of the agent environment: the starting policy. A Hugging Face checkpoint is the actor as it
    is (``Runtime.restore_actor`` loads it); a random init (``model.arch``) is saved once."""
    c = rt.cfg
    h = config_hash({"model": c.model})
    d = stage_dir(rt, "init")
    if (m := Manifest.find(d, h)) is not None:
        return m
    if c.model.checkpoint:
        # its config is enough here: the next stage restores the weights (a 7B load is minutes), and
        # only an evaluation of the starting policy loads them now
        actor = str(Path(c.model.checkpoint).resolve())
        arch = models.config_from_hf(json.loads((Path(actor) / "config.json").read_text()))
        model = rt.restore_actor(actor) if c.eval.enabled else None
    else:
        model = build_policy(c.model, 0)
        if jax.process_count() > 1:  # the save is collective: each process writes its shards of the mesh
            model = models.shard_model(model, rt.mesh)
        actor, arch = str(models.save_checkpoint(d / "actor", model)), model.config
    if arch.vocab_size < len(rt.tokenizer):
        raise ValueError(
            f"model vocabulary {arch.vocab_size} < the tokenizer's {len(rt.tokenizer)} tokens "
            "(model.tokenizer must be the checkpoint's tokenizer)"
        )
    metrics = {"params": arch.num_params()}
    ev = evaluate_stage(rt, "init", model, c.warmup.rollout)
    if ev:
        metrics["eval"] = ev
    m = Manifest("init", actor, None, 0, h, metrics, extra={"checkpoint": c.model.checkpoint})
    m.save(d)
    return m


# --- stages 1 and 4 --------------------------------------------------------------------------------------
def _generate(rt: Runtime, sampler, rollout, cursor, temperature, learner):
    """(packed batch, next cursor, rollout metrics) of the rollout batch at ``cursor`` (up to three in a row
    when one has no trainable episode)."""
    for _ in range(3):
        records = rt.env.rollout(sampler, rollout, int(cursor))
        cursor = int(cursor) + 1
        _check_sampling(records, temperature)
        batch, drops, _ = _pack(rt, records, rollout.max_len, rollout.episodes, rollout.turns, learner)
        if batch is not None:
            break
    else:
        raise RuntimeError("three rollout batches in a row had no trainable episode (see dropped/*)")
    metrics = rollout_metrics(records, rt.cfg.reward)
    metrics.update(drops.as_metrics("pack_dropped/"))
    metrics.update({f"time/{k}": v for k, v in {**rt.env.timings, **rt.timings}.items()})
    return batch, cursor, metrics


def _rollout_source(rt: Runtime, learner: Learner, rollout, box):
    """On-policy: each step samples its batch with the learner's current weights, then learns on it."""

    def source(cursor):
        rt.check_deadline()
        sampler = rt.sampler(learner.actor_model(), rollout)  # the learner's current weights, swapped in
        lc = learner.config
        batch, cursor, metrics = _generate(rt, sampler, rollout, cursor, lc.loss.temperature, lc)
        box["cursor"] = cursor
        return batch, cursor, metrics

    return source


def _check_sampling(records, temperature: float | None) -> None:
    """Every trajectory was sampled at the temperature the learner scores at (a mismatch makes every
    importance ratio wrong by a constant: the run stops, naming both)."""
    want = 1.0 if temperature is None else temperature
    for r in records:
        got = r.sampling.temperature if r.sampling is not None else None
        if got is not None and got != want:
            raise ValueError(
                f"trajectory {r.task_id} was sampled at temperature {got}, the learner scores at {want}"
            )


def _ppo_stage(rt: Runtime, prev: Manifest, stage: str, cfg, critic_from_prev: bool) -> Manifest:
    overlap = rt.cfg.overlap
    key = {"stage": cfg, "reward": rt.cfg.reward, "judge": rt.cfg.judge}
    if overlap.enabled:  # off: the hash (and the stages it finds done) as before the switch existed
        key["overlap"] = overlap
    h = config_hash(_stage_key(rt, key), prev)
    d = stage_dir(rt, stage)
    if (m := Manifest.find(d, h)) is not None:
        return m
    # Restored straight onto the run's mesh (a checkpoint of any mesh restores onto any other).
    actor = rt.restore_actor(prev.actor)
    critic = None
    if cfg.learner.advantage.estimator not in CRITIC_FREE:
        if critic_from_prev and prev.critic:
            critic = models.restore_checkpoint(prev.critic, mesh=rt.mesh)
        else:
            critic = models.Critic.from_policy(actor, seed=cfg.learner.seed)
    # A KL penalty is to the policy the stage starts from (the warm-up's: the pretrained model; PPO's: the
    # RFT actor), frozen, as verl's reference policy is.
    reference = None
    if cfg.learner.loss.kl_penalty != "none":
        reference = rt.restore_actor(prev.actor)
    learner = Learner(cfg.learner, actor, critic, reference, mesh=rt.mesh)
    critic_init = (
        "pretrained"
        if critic is not None and critic_from_prev and prev.critic
        else ("fresh" if critic is not None else "none")
    )
    del actor, critic, reference  # the learner holds its own (donated) copies
    box: dict = {}
    if overlap.enabled:
        temperature = learner.config.loss.temperature

        def generate(model, cursor):  # in the rollout thread: the sampler, the environment, its judge
            return _generate(
                rt, rt.sampler(model, cfg.rollout), cfg.rollout, cursor, temperature, cfg.learner
            )

        source = OverlappedSource(learner, generate, cfg.steps, overlap.max_staleness, box, rt.check_deadline)
    else:
        source = _rollout_source(rt, learner, cfg.rollout, box)
    try:
        rows, truncated = learner_stage(rt, stage, learner, source, cfg.steps, cfg.save_every, "ppo", box)
    finally:
        if overlap.enabled:
            source.close()
    m = stage_manifest(
        rt,
        stage,
        h,
        prev,
        d,
        rows,
        truncated,
        critic_init=critic_init,
    )
    ev = evaluate_stage(rt, stage, learner.actor_model(), cfg.rollout)
    if ev:
        m.metrics["eval"] = ev
    m.save(d)
    return m


def run_warmup(rt: Runtime, prev: Manifest) -> Manifest:
    if rt.cfg.warmup.rollout.turns != 1:
        raise ValueError("the warm-up is single-turn: warmup.rollout.turns must be 1")
    return _ppo_stage(rt, prev, "warmup", rt.cfg.warmup, critic_from_prev=False)


def run_ppo(rt: Runtime, prev: Manifest) -> Manifest:
    return _ppo_stage(rt, prev, "ppo", rt.cfg.ppo, critic_from_prev=prev.stage == "value")


# --- cold start -----------------------------------------------------------------------------------------
def run_sft(rt: Runtime, prev: Manifest) -> Manifest:
    """Cold-start SFT (env=agent): demonstrations rendered with the learner's tokenizer and chat template,
    NLL on assistant tokens only (``sft.py``), ``epochs`` passes through ``Learner.rft_step``."""
    c = rt.cfg.sft
    path = demos_path(c.demos)
    demos = hashlib.sha256(path.read_bytes()).hexdigest()
    h = config_hash(_stage_key(rt, {"stage": c, "demos": demos}), prev)
    d = stage_dir(rt, "sft")
    if (m := Manifest.find(d, h)) is not None:
        return m
    trajs, drops = demo_trajectories(c, rt.chat, rt.env.tools, rt.train_tasks)
    if not trajs:
        raise ValueError(f"sft.demos={path}: no demonstration is usable ({dict(drops)})")
    batches = []
    for e in range(c.epochs):  # each epoch in its own order; B padded to batch_size (one shape to compile)
        epoch = dataclasses.replace(c, learner=dataclasses.replace(c.learner, seed=c.learner.seed + e))
        if rt.cfg.packing:  # B a bucket of packing_rows, at most batch_size (sft_batches)
            batches += sft_batches(trajs, epoch, rt.pad_id, packing_rows(c.learner, rt.mesh), packing=True)
        else:
            batches += sft_batches(trajs, epoch, rt.pad_id, rows_multiple=c.batch_size)
    learner = Learner(c.learner, rt.restore_actor(prev.actor), None, mesh=rt.mesh)
    box: dict = {}
    info = {"demos": float(len(trajs)), **drops.as_metrics("demos_dropped/")}

    source = cycle(rt, batches, box, info)
    rows, truncated = learner_stage(rt, "sft", learner, source, len(batches), c.save_every, "rft", box)
    m = stage_manifest(rt, "sft", h, prev, d, rows, truncated, demos=str(path), kept=len(trajs))
    m.metrics.update(info)
    m.critic = None
    ev = evaluate_stage(rt, "sft", learner.actor_model(), rt.cfg.warmup.rollout)
    if ev:
        m.metrics["eval"] = ev
    m.save(d)
    return m


# --- stage 2 ---------------------------------------------------------------------------------------------
def run_rft(rt: Runtime, prev: Manifest) -> Manifest:
    c = rt.cfg.rft
    h = config_hash(_stage_key(rt, {"stage": c, "reward": rt.cfg.reward, "judge": rt.cfg.judge}), prev)
    d = stage_dir(rt, "rft")
    if (m := Manifest.find(d, h)) is not None:
        return m
    d.mkdir(parents=True, exist_ok=True)
    actor = rt.restore_actor(prev.actor)
    traj = d / "trajectories.jsonl"
    stamp = d / "trajectories.hash"
    if traj.is_file() and stamp.is_file() and stamp.read_text() == h:
        records = read_trajectories(traj)
    else:  # sampling is the expensive part (every plan judged): kept across a restart of this stage
        records = []
        sampler = rt.sampler(actor, c.rollout)
        for b in range(c.rollout_batches):
            if rt.seconds_left() is not None and rt.seconds_left() <= 0 and records:
                break
            records += rt.env.rollout(sampler, c.rollout, b)
        if is_primary():  # several processes: the same gathered records in each
            write_trajectories(traj, records)
            stamp.write_text(h)
        sync(f"trajectories:{traj}")
    kept, rejected = rft_filter(records, c.filters, rt.cfg.reward)
    sample_metrics = {
        **rollout_metrics(records, rt.cfg.reward, prefix="sampled/"),
        **rejected.as_metrics("rejected/"),
        "accepted": float(len(kept)),
    }
    kept_ids = {id(r) for r in kept}
    kept_idx = [i for i, r in enumerate(records) if id(r) in kept_ids]
    # sample_metrics first: its "accepted" (a count) must not replace the accepted indices
    extra = {**sample_metrics, "trajectories": str(traj), "accepted": kept_idx, "sampled": len(records)}
    if not c.enabled or not kept:
        m = stage_manifest(
            rt,
            "rft",
            h,
            prev,
            None,
            [],
            False,
            keep_actor=prev.actor,
            keep_critic="",
            rft_steps=0,
            reason="disabled" if not c.enabled else "no trajectory accepted",
            **extra,
        )
        m.critic = None
        m.save(d)
        return m
    rng = np.random.default_rng(c.rollout.seed)
    order = [kept[i] for i in rng.permutation(len(kept))]
    n_batches = -(-len(order) // c.batch_size)
    batches = []
    for i in range(n_batches):
        batch, _, _ = _pack(
            rt,
            order[i * c.batch_size : (i + 1) * c.batch_size],
            c.rollout.max_len,
            c.batch_size,
            c.rollout.turns,
            c.learner,
        )
        batches.append(batch)
    learner = Learner(c.learner, actor, None, mesh=rt.mesh)
    box: dict = {}

    source = cycle(rt, batches, box, {"accepted": float(len(kept))})
    rows, truncated = learner_stage(
        rt, "rft", learner, source, n_batches * c.epochs, c.save_every, "rft", box
    )
    m = stage_manifest(rt, "rft", h, prev, d, rows, truncated, rft_steps=len(rows), **extra)
    m.critic = None  # the warm-up critic is not handed on: stage 3 pretrains one
    m.metrics.update({k: v for k, v in sample_metrics.items() if not k.startswith("sampled/opt")})
    ev = evaluate_stage(rt, "rft", learner.actor_model(), c.rollout)
    if ev:
        m.metrics["eval"] = ev
    m.save(d)
    return m


# --- stage 3 ---------------------------------------------------------------------------------------------
def _mc_explained_variance(learner: Learner, batches) -> float:
    """Explained variance of the critic's values against Monte-Carlo returns (gamma 1: the sum of the
    rewards on this and later policy tokens), an estimate that does not lean on the critic itself."""
    evs = []
    for b in batches:
        prepared, _ = learner.prepare(b)
        values = to_host(prepared.values)  # several processes: each holds its rows
        m = np.asarray(b.response_mask)
        r = np.asarray(b.token_rewards) * m
        if b.segments is not None:  # packed: each trajectory in a row of its own (returns stop at its end)
            at = np.asarray(b.segments.index)
            values, m, r = (np.append(np.asarray(x).reshape(-1), 0)[at] for x in (values, m, r))
        mc = np.cumsum(r[:, ::-1], axis=1)[:, ::-1]
        if m.sum() > 1 and np.var(mc[m > 0]) > 1e-6:  # a constant return explains nothing
            evs.append(float(explained_variance(values, mc, m)))
    return float(np.mean(evs)) if evs else None


def run_value(rt: Runtime, prev: Manifest) -> Manifest:
    c = rt.cfg.value
    if prev.stage != "rft" or "trajectories" not in prev.extra:
        raise ValueError(
            f"value pretraining needs the RFT stage's trajectories, got a {prev.stage!r} manifest"
        )
    h = config_hash(_stage_key(rt, {"stage": c, "reward": rt.cfg.reward}), prev)
    d = stage_dir(rt, "value")
    if (m := Manifest.find(d, h)) is not None:
        return m
    records = read_trajectories(prev.extra["trajectories"])
    if c.on == "accepted":
        records = [records[i] for i in prev.extra["accepted"]]
    turns = max((len(r.turns) for r in records), default=1)
    max_len = max((len(r.prompt_ids) + len(r.response_ids) for r in records), default=1)
    max_len = -(-max_len // 32) * 32
    batches = []
    for i in range(0, len(records), c.batch_size):
        chunk = records[i : i + c.batch_size]
        batch, _, _ = _pack(rt, chunk, max_len, c.batch_size, max(turns, 1), c.learner)
        if batch is not None:
            batches.append(batch)
    if not batches:
        raise RuntimeError("no trajectory of the RFT stage can train a critic (all dropped)")
    actor = rt.restore_actor(prev.actor)
    critic = models.Critic.from_policy(actor, seed=c.learner.seed)
    del actor  # only the critic's initialisation; the policy is frozen here
    learner = Learner(c.learner, None, critic, mesh=rt.mesh)
    ev_before = _mc_explained_variance(learner, batches)
    box: dict = {}

    source = cycle(rt, batches, box, {})
    rows, truncated = learner_stage(rt, "value", learner, source, c.steps, c.save_every, "value", box)
    ev_after = _mc_explained_variance(learner, batches)
    m = stage_manifest(
        rt, "value", h, prev, d, rows, truncated, keep_actor=prev.actor, trajectories=len(records)
    )
    m.metrics.update(explained_variance_mc_before=ev_before, explained_variance_mc_after=ev_after)
    if rows:
        m.metrics["explained_variance_first"] = rows[0].get("explained_variance")
    m.save(d)
    return m


STAGE_FNS = {"sft": run_sft, "warmup": run_warmup, "rft": run_rft, "value": run_value, "ppo": run_ppo}
