"""Orbax checkpoints of parameters, restorable onto any mesh (or one device).

Layout of a checkpoint directory: ``params/`` (Orbax StandardCheckpointer), ``model.json`` (the
ModelConfig and the module kind), so a checkpoint restores without the caller rebuilding the config.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import orbax.checkpoint as ocp
from flax import nnx

from ._config import ModelConfig, RopeScaling
from ._critic import Critic
from ._model import CausalLM, abstract_model
from ._sharding import state_shardings

KINDS = {"CausalLM": CausalLM, "Critic": Critic}


def _params(model) -> dict:
    return nnx.to_pure_dict(nnx.state(model, nnx.Param))


def save_checkpoint(path, model) -> Path:
    """Save ``model``'s parameters (sharded or not) and config to directory ``path`` (overwritten)."""
    kind = type(model).__name__
    if kind not in KINDS:
        raise TypeError(f"save_checkpoint takes a CausalLM or Critic, got {kind}")
    path = Path(path).absolute()
    path.mkdir(parents=True, exist_ok=True)
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(path / "params", _params(model), force=True)
        ckptr.wait_until_finished()
    meta = {"kind": kind, "config": dataclasses.asdict(model.config)}
    if jax.process_index() == 0:  # several processes: Orbax wrote every process's shards, one model.json
        (path / "model.json").write_text(json.dumps(meta, indent=2))
    return path


def read_checkpoint_config(path) -> tuple[str, ModelConfig]:
    meta_file = Path(path) / "model.json"
    if not meta_file.is_file():
        raise FileNotFoundError(f"{path} is not a models checkpoint (no model.json)")
    meta = json.loads(meta_file.read_text())
    fields = dict(meta["config"])
    if fields.get("rope_scaling") is not None:
        fields["rope_scaling"] = RopeScaling(**fields["rope_scaling"])
    return meta["kind"], ModelConfig(**fields)


def restore_checkpoint(path, *, mesh=None, rules=None, **runtime):
    """Restore a model saved by :func:`save_checkpoint`, sharded onto ``mesh`` by ``rules`` (default: one
    device). ``runtime`` overrides runtime config fields (e.g. ``attention_impl``, ``remat``)."""
    kind, cfg = read_checkpoint_config(path)
    if runtime:
        cfg = cfg.replace(**runtime)
    graphdef, state = nnx.split(abstract_model(cfg, KINDS[kind]))
    abstract = nnx.to_pure_dict(state)
    if mesh is None:
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])  # several processes: ours
        shardings = jax.tree.map(lambda _: device, abstract)
    else:
        shardings = state_shardings(abstract, mesh, rules)
    target = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings
    )
    with ocp.StandardCheckpointer() as ckptr:
        restored = ckptr.restore(Path(path).absolute() / "params", target)
    nnx.replace_by_pure_dict(state, restored)
    return nnx.merge(graphdef, state)
