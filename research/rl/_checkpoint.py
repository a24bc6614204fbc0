"""Learner checkpoints: actor, critic and reference as ``models`` checkpoints (``models.save_checkpoint``:
Orbax params + model.json, so each loads alone with ``models.restore_checkpoint``), the optimizer states
with Orbax, and ``learner.json`` (step, RNG key data, data cursor, caller's extra state).

A checkpoint directory is written as ``<name>.partial`` and renamed when complete, so a run killed at any
moment leaves either the previous checkpoint or the new one, never half of one. Restoring targets the
learner's own arrays (their shapes and shardings), so a checkpoint written on one mesh restores onto
another (or onto one device).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

import models

from ._distributed import is_primary, put_replicated, sync

META = "learner.json"
_STEP_DIR = re.compile(r"^step_(\d+)$")


def _leaves(tree) -> dict:
    return {str(i): x for i, x in enumerate(jax.tree.leaves(tree))}


def save_learner(path, learner, *, cursor=None, extra: dict | None = None) -> Path:
    path = Path(path).absolute()
    tmp = path.with_name(path.name + ".partial")
    # Several processes (a shared filesystem): process 0 prepares and finishes the directory, every process
    # writes its own shards with Orbax in between (the saves are collective), barriers keep the order.
    primary = is_primary()
    if primary:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    sync(f"save_learner:start:{path}")
    st = learner.state
    parts = {"actor": learner.actor_def, "critic": learner.critic_def}
    for name, graphdef in parts.items():
        if graphdef is not None:
            models.save_checkpoint(tmp / name, nnx.merge(graphdef, getattr(st, name)))
    if learner.ref_def is not None:
        models.save_checkpoint(tmp / "reference", learner.reference_model())
    opt = {k: _leaves(v) for k, v in (("actor", st.actor_opt), ("critic", st.critic_opt)) if v is not None}
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(tmp / "optimizer", opt, force=True)
        ckptr.wait_until_finished()
    meta = {
        "step": int(st.step),
        "rng": np.asarray(jax.random.key_data(st.rng)).tolist(),
        "cursor": cursor,
        "extra": extra or {},
        "parts": [n for n, g in parts.items() if g is not None] + (["reference"] if learner.ref_def else []),
    }
    sync(f"save_learner:written:{path}")
    if primary:
        (tmp / META).write_text(json.dumps(meta, indent=2))
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    sync(f"save_learner:done:{path}")  # no process reads or prunes checkpoints before the rename
    return path


def _restore_params(path: Path, current):
    """The checkpoint's parameters placed exactly like ``current`` (an nnx.State)."""
    pure = nnx.to_pure_dict(current)
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), pure)
    with ocp.StandardCheckpointer() as ckptr:
        restored = ckptr.restore(path / "params", target)
    state = jax.tree.map(lambda x: x, current)
    nnx.replace_by_pure_dict(state, restored)
    return state


def restore_learner(path, learner) -> dict:
    path = Path(path).absolute()
    meta_file = path / META
    if not meta_file.is_file():
        raise FileNotFoundError(f"{path} is not a learner checkpoint (no {META})")
    meta = json.loads(meta_file.read_text())
    st = learner.state
    have = {"actor": st.actor is not None, "critic": st.critic is not None}
    for name, present in have.items():
        if present != (name in meta["parts"]):
            raise ValueError(f"checkpoint {path} parts {meta['parts']} do not match this learner ({have})")
    actor = _restore_params(path / "actor", st.actor) if have["actor"] else None
    critic = _restore_params(path / "critic", st.critic) if have["critic"] else None
    if learner.ref_def is not None:
        learner.ref_params = _restore_params(path / "reference", learner.ref_params)
    opts = {k: v for k, v in (("actor", st.actor_opt), ("critic", st.critic_opt)) if v is not None}
    target = {
        k: {i: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding) for i, x in _leaves(v).items()}
        for k, v in opts.items()
    }
    with ocp.StandardCheckpointer() as ckptr:
        restored = ckptr.restore(path / "optimizer", target)
    opts = {
        k: jax.tree.unflatten(jax.tree.structure(v), [restored[k][str(i)] for i in range(len(restored[k]))])
        for k, v in opts.items()
    }
    rng = jax.random.wrap_key_data(np.asarray(meta["rng"], np.uint32))
    learner.state = st._replace(
        actor=actor,
        critic=critic,
        actor_opt=opts.get("actor"),
        critic_opt=opts.get("critic"),
        step=put_replicated(np.int32(meta["step"]), st.step.sharding),
        rng=put_replicated(rng, st.rng.sharding),
    )
    return meta


class CheckpointDir:
    """``step_<n>`` checkpoints under one directory; ``latest`` is the newest complete one."""

    def __init__(self, root, keep: int = 2):
        self.root = Path(root)
        self.keep = keep

    def steps(self) -> list[int]:
        if not self.root.is_dir():
            return []
        found = (_STEP_DIR.match(p.name) for p in self.root.iterdir())
        return sorted(int(m.group(1)) for m in found if m and (self.root / m.group(0) / META).is_file())

    def latest(self) -> Path | None:
        steps = self.steps()
        return self.root / f"step_{steps[-1]:08d}" if steps else None

    def save(self, step: int, learner, *, cursor=None, extra=None) -> Path:
        out = save_learner(self.root / f"step_{step:08d}", learner, cursor=cursor, extra=extra)
        for old in self.steps()[: -self.keep] if self.keep > 0 and is_primary() else []:
            shutil.rmtree(self.root / f"step_{old:08d}", ignore_errors=True)
        return out
