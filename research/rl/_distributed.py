"""Multi-process (multi-host) JAX: ``jax.distributed`` by config, process-0-only writes, barriers, objects
gathered from every process and process-local copies of models sharded over several processes.

After :func:`initialize_distributed`, ``jax.devices()`` lists every process's devices, so
``models.make_mesh(...)`` (which defaults to ``jax.devices()``) is a mesh over all hosts and a ``Learner``
built on it runs each update as one SPMD program: every process calls the same steps with the same
global batch (``Learner.put`` keeps only this process's rows, see there). Orbax writes each process's
shards; files that are one per run (metrics, manifests, ``learner.json``) are written by process 0 only.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("single", "auto", "manual")


@dataclass
class DistributedConfig:
    """``single``: one process (the default). ``auto``: ``jax.distributed.initialize()`` detects the
    cluster (SLURM, Open MPI, Kubernetes, TPU pods); any field given here overrides what it detects.
    ``manual``: every field below that has no default must be set (each process gets its own process_id)."""

    mode: str = "single"  # single | auto | manual
    coordinator_address: str | None = None  # host:port of process 0 (manual: required)
    num_processes: int | None = None  # manual: required
    process_id: int | None = None  # manual: required, 0 .. num_processes - 1
    local_device_ids: list[int] | None = None  # None: every local accelerator JAX sees
    initialization_timeout_s: int = 300

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"distributed.mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "manual":
            missing = [
                k for k in ("coordinator_address", "num_processes", "process_id") if getattr(self, k) is None
            ]
            if missing:
                raise ValueError(
                    f"distributed.mode=manual needs distributed.{', distributed.'.join(missing)}"
                )
        if self.coordinator_address is not None and ":" not in self.coordinator_address:
            raise ValueError(
                f"distributed.coordinator_address must be host:port, got {self.coordinator_address!r}"
            )
        if self.num_processes is not None and self.num_processes < 1:
            raise ValueError(f"distributed.num_processes must be >= 1, got {self.num_processes}")
        if self.process_id is not None and not (
            0 <= self.process_id < (self.num_processes or self.process_id + 1)
        ):
            raise ValueError(
                f"distributed.process_id must be in [0, {self.num_processes}), got {self.process_id}"
            )


def initialize_distributed(cfg: DistributedConfig) -> bool:
    """Start ``jax.distributed`` per ``cfg`` (once per process, before any JAX computation); True when it
    did. Calling it again after a successful start is a no-op."""
    if cfg.mode == "single":
        return False
    import jax
    from jax._src import distributed as _dist
    from jax._src import xla_bridge

    if _dist.global_state.client is not None:
        return True
    if xla_bridge.backends_are_initialized():
        # jax would fail later with a less direct message; this is a bug of the entry point, not the config
        raise RuntimeError("distributed: JAX already ran a computation; initialise jax.distributed first")
    kw = dict(
        coordinator_address=cfg.coordinator_address,
        num_processes=cfg.num_processes,
        process_id=cfg.process_id,
        local_device_ids=cfg.local_device_ids,
        initialization_timeout=cfg.initialization_timeout_s,
    )
    if cfg.mode == "manual":
        kw["cluster_detection_method"] = "deactivate"  # exactly what was given, no environment guessing
    try:
        jax.distributed.initialize(**kw)
    except ValueError as exc:  # e.g. auto mode outside any detectable cluster
        raise ValueError(f"distributed.mode={cfg.mode}: {str(exc).splitlines()[0]}") from None
    return True


def is_primary() -> bool:
    """True in process 0 (or when single-process): the one that writes run-level files."""
    import jax

    return jax.process_index() == 0


def put_replicated(x, sharding):
    """``jax.device_put(x, sharding)`` that also works with several processes, where a sharding over other
    processes' devices only accepts host values (the same in every process), not a committed local array."""
    import jax
    import numpy as np

    if jax.process_count() == 1:
        return jax.device_put(x, sharding)
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):  # keys travel as their raw uint32 data
        data = put_replicated(jax.random.key_data(x), sharding)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    return jax.device_put(np.asarray(jax.device_get(x)), sharding)


def sync(name: str) -> None:
    """A barrier across processes (no-op in one process), e.g. between process 0 preparing a directory and
    every process writing its shards into it."""
    import jax

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def allgather_objects(objs: list) -> list:
    """Every process's ``objs`` (JSON-able values) concatenated in process order, in every process (a
    collective: every process calls it at the same point). One process: ``objs`` itself, untouched."""
    import jax

    if jax.process_count() == 1:
        return objs
    import json

    import numpy as np
    from jax.experimental import multihost_utils

    data = np.frombuffer(json.dumps(objs).encode(), np.uint8)
    # Lengths first (int32 without x64: 2 GiB per process at most), then one buffer padded to the longest.
    lengths = np.asarray(multihost_utils.process_allgather(np.int32(data.size))).reshape(-1)
    buf = np.zeros(max(int(lengths.max()), 1), np.uint8)
    buf[: data.size] = data
    rows = np.asarray(multihost_utils.process_allgather(buf))
    out: list = []
    for row, n in zip(rows, lengths):
        out += json.loads(row[: int(n)].tobytes())
    return out


def agree(value):
    """Process 0's ``value`` (a bool or number) in every process: decisions that must not differ between
    processes (a time budget read off each process's clock) before a collective. One process: ``value``."""
    import jax

    if jax.process_count() == 1:
        return value
    import numpy as np
    from jax.experimental import multihost_utils

    got = np.asarray(multihost_utils.broadcast_one_to_all(np.asarray(value, np.float32))).item()
    return bool(got) if isinstance(value, bool) else got


def to_host(x):
    """A device array as a numpy array of its global value (gathered when other processes hold parts)."""
    import jax
    import numpy as np

    if getattr(x, "is_fully_addressable", True):
        return np.asarray(jax.device_get(x))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def local_model(model, mesh=None):
    """``model`` itself when every parameter lives on this process's devices (one process, or a mesh of
    local devices); else a copy gathered from every process (a collective), placed on ``mesh`` (local
    devices; None: the first local device). Each leaf goes through host memory in turn, so the peak is one
    full leaf per device beside the copy; the rollout samplers of several processes decode from it."""
    import jax
    from flax import nnx

    import models

    graphdef, state = nnx.split(model)
    if all(getattr(x, "is_fully_addressable", True) for x in jax.tree.leaves(state)):
        return model
    pure = nnx.to_pure_dict(state)
    if mesh is None:
        one = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        shardings = jax.tree.map(lambda _: one, pure)
    else:
        shardings = models.state_shardings(pure, mesh)
    placed = jax.tree.map(lambda x, s: jax.device_put(to_host(x), s), pure, shardings)
    nnx.replace_by_pure_dict(state, placed)
    return nnx.merge(graphdef, state)


__all__ = [
    "DistributedConfig",
    "agree",
    "allgather_objects",
    "initialize_distributed",
    "is_primary",
    "local_model",
    "put_replicated",
    "sync",
    "to_host",
]
