"""``Learner``: holds the actor, critic and optimizer states (one ``TrainState``), places batches on the
mesh and runs the jitted pure functions of _update.py: ``ppo_step`` (prepare, then epochs x mini-batches
of one actor + critic update each), ``rft_step``, ``value_step``, and ``actor_update`` (one step of the
actor on a loss of the caller's: the toy policy's pretraining trains through it).

Sharding: the actor and critic are placed by ``models.shard_model`` (the (data, fsdp, tensor) rules of
``models.DEFAULT_RULES``); optimizer moments follow their parameters (``_mesh.init_sharded``); batches are
sharded over rows on (data, fsdp). With several JAX processes (``research.rl.initialize_distributed``) the
mesh spans every host's devices and each process passes the same global batch. Updates keep every state
leaf's sharding (``out_shardings``), so a step never recompiles for a drifted layout. Nothing here assumes
CUDA: the same code runs with XLA on CPU/TPU.

A packed batch (``PackConfig(packing=True)``) goes through the same steps: its ``segments`` table is
placed replicated and used by ``prepare`` only. Every step reports ``batch/pad_fraction`` (token slots
that hold no trajectory token) when the batch came from ``pack_trajectories``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import models

from . import _update
from ._batch import RLBatch
from ._checkpoint import restore_learner, save_learner
from ._config import LearnerConfig
from ._distributed import put_replicated
from ._mesh import init_sharded
from ._optim import make_optimizer
from ._update import TrainState


def _split(model):
    """(graphdef, a copy of the parameters): updates donate their state, the caller's model stays valid."""
    if model is None:
        return None, None
    graphdef, params = nnx.split(model)
    return graphdef, jax.tree.map(jnp.copy, params)


def _host_metrics(metrics) -> dict[str, float]:
    return {k: float(v) for k, v in jax.device_get(metrics).items()}


def _layout_metrics(batch: RLBatch) -> dict[str, float]:
    if batch.segment_ids is None:
        return {}
    seg = np.asarray(jax.device_get(batch.segment_ids))
    return {"batch/pad_fraction": float(1.0 - np.count_nonzero(seg) / max(seg.size, 1))}


def jitted_updates(
    cfg: LearnerConfig, actor_def, critic_def, ref_def, actor_tx, critic_tx, *, mesh=None, out_shardings=None
) -> dict:
    """The learner's jitted programs (``prepare``, ``ppo``, ``rft``, ``value``) bound to its graph
    definitions, optimizers and config; every update donates the state. ``Learner`` compiles these, and
    ``benchmarks.models.peak_memory`` lowers the same ones on abstract state (no weights allocated)."""
    jit = lambda fn: jax.jit(fn, donate_argnums=(0,), out_shardings=out_shardings)
    bound = functools.partial
    return {
        "prepare": jax.jit(
            bound(_update.prepare, actor_def=actor_def, critic_def=critic_def, ref_def=ref_def, cfg=cfg)
        ),
        "ppo": jit(
            bound(
                _update.ppo_update, actor_def=actor_def, critic_def=critic_def, actor_tx=actor_tx,
                critic_tx=critic_tx, cfg=cfg, mesh=mesh,
            )
        ),
        "rft": jit(bound(_update.rft_update, actor_def=actor_def, actor_tx=actor_tx, cfg=cfg, mesh=mesh)),
        "value": jit(
            bound(_update.value_update, critic_def=critic_def, critic_tx=critic_tx, cfg=cfg, mesh=mesh)
        ),
    }


class Learner:
    """Actor (``models.CausalLM``), critic (``models.Critic``, separate parameters; None for critic-free
    estimators) and an optional frozen reference policy (for KL penalties), trained per ``config``."""

    def __init__(
        self, config: LearnerConfig, actor=None, critic=None, reference=None, *, mesh=None, rules=None
    ):
        if actor is None and critic is None:
            raise ValueError("a Learner needs an actor, a critic or both")
        if config.loss.kl_penalty != "none" and reference is None:
            raise ValueError(f"kl_penalty={config.loss.kl_penalty!r} needs a reference policy")
        budget = config.micro_batch_tokens
        if budget is not None and (config.micro_batches != 1 or budget < 1):
            raise ValueError(
                f"micro_batch_tokens={config.micro_batch_tokens} needs micro_batches=1 (one or the other) "
                "and a positive budget"
            )
        self.config, self.mesh, self.rules = config, mesh, rules
        place = (lambda m: m if m is None else models.shard_model(m, mesh, rules)) if mesh else (lambda m: m)
        actor, critic, reference = place(actor), place(critic), place(reference)
        self.actor_def, actor_p = _split(actor)
        self.critic_def, critic_p = _split(critic)
        self.ref_def, self.ref_params = _split(reference)
        self.actor_tx = make_optimizer(config.actor)
        self.critic_tx = make_optimizer(config.critic)
        if mesh is None:
            init = lambda tx, p: None if p is None else jax.jit(tx.init)(p)
        else:  # moments laid out like their parameters (XLA alone would replicate them)
            init = lambda tx, p: None if p is None else init_sharded(tx, p, mesh)
        self.state = TrainState(
            actor=actor_p,
            critic=critic_p,
            actor_opt=init(self.actor_tx, actor_p),
            critic_opt=init(self.critic_tx, critic_p),
            step=jnp.zeros((), jnp.int32),
            rng=jax.random.key(config.seed),
        )
        if mesh is not None:  # leaves made off the mesh (step, RNG, optimizer counts): replicated on it
            rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
            on_mesh = lambda a: isinstance(a.sharding, jax.sharding.NamedSharding) and a.sharding.mesh == mesh
            self.state = jax.tree.map(lambda a: a if on_mesh(a) else put_replicated(a, rep), self.state)
        self._shardings = jax.tree.map(lambda a: a.sharding, self.state)
        self._compile()

    def _compile(self):
        out = (self._shardings, None) if self.mesh is not None else None
        self._jit = lambda fn: jax.jit(fn, donate_argnums=(0,), out_shardings=out)
        self._actor_updates = {}
        programs = jitted_updates(
            self.config, self.actor_def, self.critic_def, self.ref_def, self.actor_tx, self.critic_tx,
            mesh=self.mesh, out_shardings=out,
        )
        self._prepare, self._ppo, self._rft, self._value = (
            programs[k] for k in ("prepare", "ppo", "rft", "value")
        )

        @jax.jit
        def shuffle(rng, batch):
            rng, key = jax.random.split(rng)
            perm = jax.random.permutation(key, batch.tokens.shape[0])
            return rng, jax.tree.map(lambda x: jnp.take(x, perm, axis=0), batch)

        self._shuffle = shuffle

    # --- batches ------------------------------------------------------------------------------------------
    def put(self, batch: RLBatch) -> RLBatch:
        """Host arrays -> device arrays, rows sharded over (data, fsdp) on the learner's mesh."""
        if batch.segments is not None:  # not row-aligned: every device holds the whole table
            rows = self.put(batch._replace(segments=None))
            if self.mesh is None:
                return rows._replace(segments=jax.tree.map(jnp.asarray, batch.segments))
            rep = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())
            table = jax.tree.map(lambda x: put_replicated(np.asarray(x), rep), batch.segments)
            return rows._replace(segments=table)
        if self.mesh is None:
            return jax.tree.map(jnp.asarray, batch)
        sharding = models.batch_sharding(self.mesh)
        if jax.process_count() == 1:
            return jax.tree.map(lambda x: jax.device_put(np.asarray(x), sharding), batch)
        # Several processes: each passes the same global batch and keeps the rows of its own devices
        # (global_shape == local shape). Rows replicated across processes (a batch shard spread over hosts)
        # must then be equal in every process: the batch has to be a deterministic function of the step.
        return jax.tree.map(
            lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x), np.shape(x)), batch
        )

    def prepare(self, batch: RLBatch):
        """(batch with old log-probs, values, advantages and returns, metrics) for the current weights."""
        prepared, metrics = self._prepare(self.state, self.put(batch), self.ref_params)
        return prepared, metrics

    def _minibatches(self, batch: RLBatch):
        cfg = self.config
        b = batch.tokens.shape[0]
        if b % cfg.minibatches:
            raise ValueError(f"batch of {b} rows does not split into {cfg.minibatches} mini-batches")
        size = b // cfg.minibatches
        for _ in range(cfg.epochs):
            if cfg.epochs > 1 or cfg.minibatches > 1:
                rng, batch = self._shuffle(self.state.rng, batch)
                self.state = self.state._replace(rng=rng)
            for i in range(cfg.minibatches):
                yield (
                    batch
                    if cfg.minibatches == 1
                    else jax.tree.map(lambda x, i=i: x[i * size : (i + 1) * size], batch)
                )

    def _run(self, fn, batch, prepare_metrics) -> dict[str, float]:
        sums, n = None, 0
        for mb in self._minibatches(batch):
            self.state, metrics = fn(self.state, mb)
            sums = metrics if sums is None else jax.tree.map(jnp.add, sums, metrics)
            n += 1
        out = _host_metrics({k: v / n for k, v in sums.items()})
        out.update(_host_metrics(prepare_metrics))
        return out

    # --- steps --------------------------------------------------------------------------------------------
    def ppo_step(self, batch: RLBatch) -> dict[str, float]:
        """Prepare with the current weights, then epochs x mini-batches of one actor + critic update."""
        prepared, pm = self.prepare(batch)
        return {**self._run(self._ppo, prepared, pm), **_layout_metrics(batch)}

    def update(self, prepared: RLBatch) -> dict[str, float]:
        """Exactly one jitted actor + critic optimizer step on a prepared (device) batch."""
        self.state, metrics = self._ppo(self.state, prepared)
        return _host_metrics(metrics)

    # Each jitted function binds its own models and optimizers (functools.partial): alike in shape only.
    def gradients(self, prepared: RLBatch):
        """(actor grads, critic grads, metrics) that :meth:`update` would apply (diagnostics, tests)."""
        if not hasattr(self, "_grads"):
            self._grads = jax.jit(
                functools.partial(
                    _update.ppo_gradients,
                    actor_def=self.actor_def,
                    critic_def=self.critic_def,
                    cfg=self.config,
                    mesh=self.mesh,
                )
            )
        a, am, c, cm = self._grads(self.state, prepared)
        return a, c, _host_metrics({**am, **cm})

    def actor_update(self, loss_fn, batch) -> dict:
        """One jitted optimizer step of the actor on ``loss_fn(model, batch) -> (loss, metrics)`` (compiled
        once per ``loss_fn``) over a batch the caller placed (any pytree). The metrics stay on the device:
        reading them is the caller's choice (a host sync per step would stall a fast loop)."""
        step = self._actor_updates.get(loss_fn)
        if step is None:
            step = self._actor_updates[loss_fn] = self._jit(
                functools.partial(
                    _update.actor_update, loss_fn=loss_fn, actor_def=self.actor_def, actor_tx=self.actor_tx
                )
            )
        self.state, metrics = step(self.state, batch)
        return metrics

    def rft_step(self, batch: RLBatch) -> dict[str, float]:
        """Rejection fine-tuning: NLL of the policy tokens (the caller keeps only accepted trajectories)."""
        rows = self.put(batch._replace(segments=None))  # no advantages: the table is not needed
        return {**self._run(self._rft, rows, {}), **_layout_metrics(batch)}

    def value_step(self, batch: RLBatch) -> dict[str, float]:
        """Value pretraining: GAE targets from the current critic on frozen-policy trajectories; the
        explained variance reported is of the values before this step's updates."""
        prepared, pm = self.prepare(batch)
        return {**self._run(self._value, prepared, pm), **_layout_metrics(batch)}

    # --- models and checkpoints --------------------------------------------------------------------------
    def actor_model(self):
        return nnx.merge(self.actor_def, self.state.actor)

    def critic_model(self):
        return nnx.merge(self.critic_def, self.state.critic)

    def reference_model(self):
        return None if self.ref_def is None else nnx.merge(self.ref_def, self.ref_params)

    def save(self, path, *, cursor=None, extra: dict | None = None):
        return save_learner(path, self, cursor=cursor, extra=extra)

    def restore(self, path) -> dict:
        """Load a checkpoint of :meth:`save` into this learner (onto its mesh); returns the metadata."""
        return restore_learner(path, self)
