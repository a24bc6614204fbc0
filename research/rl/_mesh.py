"""The learner mesh of a run as a typed config: sizes of the (data, fsdp, tensor) axes of ``models``.

The default (1, 1, 1) is one device, exactly the unsharded code path (``build_mesh`` returns None), on
any number of devices. One size
may be -1: every remaining device (``conf/mesh/auto.yaml``: ``fsdp: -1``, every local device on the fsdp
axis, so parameters, gradients and optimizer moments are split and batches are sharded over rows).
Sizes are checked against the device count when the mesh is built (JAX may not be started earlier) and
batch sizes against the number of row shards (data x fsdp) by ``check_rows``.
"""

from __future__ import annotations

from dataclasses import dataclass

AXES = ("data", "fsdp", "tensor")


class MeshError(ValueError):
    """A mesh setting that does not fit the devices or a batch size (one line, naming the field)."""


@dataclass
class MeshConfig:
    data: int = 1
    fsdp: int = 1
    tensor: int = 1

    def __post_init__(self) -> None:
        sizes = self.sizes()
        for name, s in zip(AXES, sizes):
            if s == 0 or s < -1:
                raise MeshError(f"mesh.{name} must be >= 1 or -1 (every remaining device), got {s}")
        if sizes.count(-1) > 1:
            raise MeshError(f"mesh: at most one of data/fsdp/tensor may be -1, got {self.as_dict()}")

    def sizes(self) -> list[int]:
        return [self.data, self.fsdp, self.tensor]

    def as_dict(self) -> dict[str, int]:
        return dict(zip(AXES, self.sizes()))

    @property
    def single(self) -> bool:
        return self.sizes() == [1, 1, 1]

    def resolved(self, n_devices: int) -> MeshConfig:
        """Sizes with -1 filled in for ``n_devices``; a product that is not ``n_devices`` is a MeshError."""
        sizes = self.sizes()
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        if -1 in sizes:
            i = sizes.index(-1)
            if n_devices % known:
                raise MeshError(
                    f"mesh.{AXES[i]}=-1: {n_devices} devices do not split over the other axes "
                    f"(product {known}) of mesh {self.as_dict()}"
                )
            sizes[i] = n_devices // known
        elif known != n_devices:
            raise MeshError(
                f"mesh data*fsdp*tensor = {known} ({self.as_dict()}) must equal the {n_devices} local "
                "devices (set mesh.data/mesh.fsdp/mesh.tensor, or mesh=auto)"
            )
        return MeshConfig(*sizes)

    @property
    def row_shards(self) -> int:
        """Rows of a batch are split over data x fsdp (``models.batch_sharding``)."""
        return self.data * self.fsdp

    def check_rows(self, field: str, rows: int, splits: int = 1) -> None:
        """``rows`` per batch (``field`` names its setting), cut into ``splits`` pieces (mini- x micro-
        batches) that each must split evenly over the row shards of this (resolved) mesh."""
        need = self.row_shards * splits
        if rows % need:
            per = f" x {splits} mini/micro-batches" if splits > 1 else ""
            raise MeshError(
                f"{field}={rows} does not split over mesh data*fsdp = {self.row_shards}{per} "
                f"({self.as_dict()}): use a multiple of {need}"
            )


def init_sharded(tx, params, mesh):
    """``tx.init(params)`` with every optimizer leaf that mirrors a parameter (Adam's mu/nu: same path
    suffix, same shape) laid out like that parameter and the rest (counts) replicated on ``mesh``. Left to
    XLA, ``jit(tx.init)`` makes the moments replicated (zeros depend on no input's layout), which undoes
    FSDP's memory split for two thirds of the training state; out_shardings also avoids a replicated
    intermediate."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    keystr = jax.tree_util.keystr
    by_path = {keystr(k): a for k, a in jax.tree_util.tree_flatten_with_path(params)[0]}
    replicated = NamedSharding(mesh, PartitionSpec())

    def place(path, leaf):
        key = keystr(path)
        hits = [p for p in by_path if key.endswith(p) and by_path[p].shape == leaf.shape]
        return by_path[max(hits, key=len)].sharding if hits else replicated

    abstract = jax.eval_shape(tx.init, params)
    return jax.jit(tx.init, out_shardings=jax.tree_util.tree_map_with_path(place, abstract))(params)


def build_mesh(cfg: MeshConfig, devices=None):
    """The ``models`` mesh for ``cfg`` over ``devices`` (default: ``jax.devices()``, every device of every
    process: one process's own, or with several processes a mesh spanning them), or None for the
    single-device default."""
    import jax

    import models

    if cfg.single:  # today's path: whatever device JAX puts arrays on, no mesh, nothing resharded
        return None
    devices = list(jax.devices() if devices is None else devices)
    sizes = cfg.resolved(len(devices))
    return models.make_mesh(sizes.data, sizes.fsdp, sizes.tensor, devices=devices)


__all__ = ["MeshConfig", "MeshError", "build_mesh", "init_sharded"]
