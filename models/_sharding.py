"""Device meshes with axes (data, fsdp, tensor) and regex partition rules -> NamedSharding.

Parameters are matched by their path (``model/layers/q_proj``); the first matching rule gives the
PartitionSpec. A mesh axis that does not divide its dimension is dropped for that parameter (the dimension
is replicated) so the same rules work for any model size and mesh, one device included.
"""

from __future__ import annotations

import re

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")

# Megatron-style tensor parallelism over heads / MLP width, FSDP over the model width. Layer weights carry
# a leading layer axis (never sharded). Orientation is Hugging Face's [out, in] (see models/_layers.py).
DEFAULT_RULES: tuple[tuple[str, P], ...] = (
    (r"(^|/)(embed|lm_head)$", P("tensor", "fsdp")),
    (r"layers/q_proj$", P(None, "tensor", None, "fsdp")),
    (r"layers/kv_proj$", P(None, None, "tensor", None, "fsdp")),
    (r"layers/o_proj$", P(None, "fsdp", "tensor", None)),
    (r"layers/gate_up$", P(None, None, "tensor", "fsdp")),
    (r"layers/down$", P(None, "fsdp", "tensor")),
    (r"layers/q_bias$", P(None, "tensor", None)),
    (r"layers/kv_bias$", P(None, None, "tensor", None)),
    (r".*", P()),  # norms, biases, value head: replicated
)


def make_mesh(data: int = 1, fsdp: int = -1, tensor: int = 1, devices=None) -> Mesh:
    """A mesh with axes (data, fsdp, tensor); one size may be -1 (all remaining devices)."""
    devices = list(jax.devices() if devices is None else devices)
    sizes = [data, fsdp, tensor]
    if sizes.count(-1) > 1:
        raise ValueError("at most one mesh axis size may be -1")
    known = int(np.prod([s for s in sizes if s != -1]))
    if -1 in sizes:
        if len(devices) % known:
            raise ValueError(f"{len(devices)} devices cannot be split into mesh {dict(zip(AXES, sizes))}")
        sizes[sizes.index(-1)] = len(devices) // known
    if int(np.prod(sizes)) != len(devices):
        raise ValueError(
            f"mesh {dict(zip(AXES, sizes))} needs {int(np.prod(sizes))} devices, have {len(devices)}"
        )
    return Mesh(np.asarray(devices).reshape(sizes), AXES)


def _fit(spec: P, shape, mesh: Mesh) -> P:
    """Drop mesh axes that do not divide their dimension (or that the array does not have)."""
    out = []
    for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
        if axes is None:
            out.append(None)
            continue
        names = axes if isinstance(axes, tuple) else (axes,)
        size = int(np.prod([mesh.shape[a] for a in names]))
        out.append(axes if dim % size == 0 else None)
    return P(*out)


def spec_for(path: str, shape, mesh: Mesh, rules=None) -> P:
    for pattern, spec in DEFAULT_RULES if rules is None else rules:
        if re.search(pattern, path):
            if len(spec) > len(shape):
                raise ValueError(
                    f"rule {pattern!r} -> {spec} has more axes than parameter {path} {tuple(shape)}"
                )
            return _fit(spec, shape, mesh)
    return P()


def _path(keys) -> str:
    return "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in keys)


def state_shardings(tree, mesh: Mesh, rules=None):
    """NamedSharding for every array leaf of a (pure-dict) parameter tree."""
    return jax.tree_util.tree_map_with_path(
        lambda keys, a: NamedSharding(mesh, spec_for(_path(keys), np.shape(a), mesh, rules)), tree
    )


def put(x, sharding):
    """``jax.device_put(x, sharding)``, also when ``sharding`` spans several processes' devices and ``x`` is
    a process-local array: JAX takes only host values there (each process passes the same value; a local
    array put directly comes out with broken shards)."""
    if (
        jax.process_count() > 1
        and not sharding.is_fully_addressable
        and getattr(x, "is_fully_addressable", False)
    ):
        x = np.asarray(jax.device_get(x))
    return jax.device_put(x, sharding)


def shard_model(model, mesh: Mesh, rules=None):
    """``model`` with every parameter placed on ``mesh`` by ``rules`` (returns a new module)."""
    graphdef, state = nnx.split(model)
    pure = nnx.to_pure_dict(state)
    placed = jax.tree.map(put, pure, state_shardings(pure, mesh, rules))
    nnx.replace_by_pure_dict(state, placed)
    return nnx.merge(graphdef, state)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Inputs [B, T]: batch over (data, fsdp), sequence replicated."""
    return NamedSharding(mesh, P(BATCH_AXES))
