"""The Ray backend of the sandbox (``SandboxConfig(backend="ray")``): the fleet's run and compile workers as
Ray actors on a cluster, one actor per worker.

Placement is Ray's, by resources: a run actor on a GPU cluster reserves ``num_gpus=1`` (Ray sets its
``CUDA_VISIBLE_DEVICES``: one run worker per GPU, as locally), compile actors reserve CPUs only, every actor
``ray_cpus_per_actor`` CPUs. In CPU mode (no GPU in the cluster, or ``device="cpu"``) the run actors are
CPU actors too (Triton under its interpreter). The client, its threads and its temp directory stay on the
caller's machine; what runs where is otherwise the local backend's (``Fleet``), so the client is unchanged.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

from .errors import SandboxError
from .fleet import Fleet
from .ray_actor import SandboxActor
from .ray_pool import RayWorkerPool, ray_module

# A Ray started here serves a handful of actors whose messages are sources and verdicts (at most
# messages.MAX_MESSAGE_BYTES each): Ray's default object store (30% of the machine's memory) is waste.
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20

_ray_lock = threading.Lock()
_ray_users = 0  # clients of this process using a Ray connection that this module opened


def _connect(cfg) -> bool:
    """Attach to (or start) Ray; True when this module opened the connection (closed with its last user)."""
    global _ray_users
    ray = ray_module()
    with _ray_lock:
        if ray.is_initialized():
            if _ray_users:
                _ray_users += 1
                return True
            return False  # the caller's own Ray (e.g. ray.init with a runtime_env): theirs to shut down
        address = cfg.ray_address or os.environ.get("RAY_ADDRESS")
        try:
            if address:
                ray.init(address=address, namespace=cfg.ray_namespace)
            else:
                ray.init(
                    namespace=cfg.ray_namespace,
                    include_dashboard=False,
                    object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                )
        except Exception as exc:
            where = f"the Ray cluster at {address!r}" if address else "a local Ray"
            raise SandboxError(f"could not start or reach {where}: {exc}") from None
        _ray_users = 1
        return True


def _disconnect() -> None:
    global _ray_users
    with _ray_lock:
        _ray_users -= 1
        if _ray_users == 0:
            ray_module().shutdown()


def resolve_device(device: str, cluster_gpus: int) -> str:
    """``device`` for a Ray cluster: ``auto`` is CUDA when the cluster has GPU resources."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; use one of ('auto', 'cpu', 'cuda')")
    if device == "cuda" and not cluster_gpus:
        raise SandboxError(
            "device='cuda' but the Ray cluster has no GPU resources (start GPU nodes with "
            "`ray start --address HEAD:6379 --num-gpus N`, or use device='auto' or 'cpu')"
        )
    return "cuda" if device != "cpu" and cluster_gpus else "cpu"


def run_actor_count(cfg, device: str, cluster_gpus: int) -> int:
    """At most one run actor per GPU (two would disturb each other's timings); CPU mode: as configured."""
    if device == "cuda":
        return min(cfg.ray_run_actors or cfg.num_gpu_workers or cluster_gpus, cluster_gpus)
    return max(1, cfg.ray_run_actors)


class RayFleet(Fleet):
    _owns_ray = False

    def _pools(self) -> tuple[RayWorkerPool, RayWorkerPool]:
        cfg = self.config
        if self.run_workers_per_gpu() != 1:  # before Ray starts: a settings error costs nothing
            raise SandboxError(
                f"sandbox.run_workers_per_gpu={cfg.run_workers_per_gpu} applies to backend=local only: Ray "
                "places one run actor per GPU (in CPU mode, ray_run_actors sets how many)"
            )
        if cfg.gpus is not None:  # a node's GPUs are Ray's to hand out, by resources, not ours to pick
            raise SandboxError(
                "sandbox.gpus does not apply to backend=ray: start each Ray node with the judge GPUs only "
                "(CUDA_VISIBLE_DEVICES=... ray start --num-gpus N) and leave sandbox.gpus null"
            )
        ray = ray_module()
        self._owns_ray = _connect(cfg)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        self.device = resolve_device(cfg.device, gpus)
        run_env, compile_env = self.worker_envs()
        remote = ray.remote(SandboxActor)
        prefix = f"kernels_env-{uuid.uuid4().hex[:8]}"  # unique per client, readable in `ray list actors`
        base: dict[str, Any] = {
            "client_tmp": str(self.tmp),
            "client_cache": str(self.cache_dir),
            "cache_dir": cfg.cache_dir,  # expanded on the actor's node
            "memory_limit_bytes": int(cfg.memory_limit_gb * 2**30),
            "startup_timeout_s": cfg.startup_timeout_s,
        }

        def spawner(spec: dict[str, Any], gpu: bool):
            def spawn(name: str, generation: int):
                options = {
                    "num_cpus": cfg.ray_cpus_per_actor,
                    "num_gpus": 1 if gpu else 0,
                    "name": f"{prefix}-{name}-{generation}",
                    "namespace": cfg.ray_namespace,
                    "max_restarts": 0,  # the pool replaces a dead actor itself and answers its request
                    "max_concurrency": 1,  # one request at a time, as a local worker
                }
                return remote.options(**options).remote({**base, **spec, "name": name})

            return spawn

        run_spec = {
            "role": "run",
            "device": self.device,
            "env": run_env,  # no CUDA_VISIBLE_DEVICES on a GPU: Ray's choice for the actor is inherited
            "max_requests": cfg.max_requests_per_worker,
            "standby": cfg.standby_run_workers,
        }
        compile_spec = {"role": "compile", "device": "cpu", "env": compile_env, "max_requests": 0}
        count = run_actor_count(cfg, self.device, gpus)
        wait = cfg.startup_timeout_s
        run = RayWorkerPool(spawner(run_spec, self.device == "cuda"), [f"run{i}" for i in range(count)], wait)
        compiles = [f"compile{i}" for i in range(max(1, cfg.num_compile_workers))]
        return run, RayWorkerPool(spawner(compile_spec, False), compiles, wait)

    def close(self) -> None:
        super().close()
        if self._owns_ray:
            self._owns_ray = False
            _disconnect()
