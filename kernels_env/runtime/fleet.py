"""The sandbox's processes for one client: one run worker per GPU (or one CPU run worker; with
``run_workers_per_gpu`` that many), CPU compile workers, optional standby run workers, a private temp
directory and the threads requests run on.

With several run workers per GPU and ``exclusive_timing`` each GPU gets a lock (``kernels_env.host.gpu_lock``:
its files in the temp directory, named to the GPU's workers by ``gpu_lock.ENV``), so that their timed
measurements hold the GPU alone (``timing_lock``).

Started on first use, in parallel; ``close`` stops everything and removes the temp directory.
``backends.make_fleet`` picks the backend: this one (processes on this machine) or ``ray_fleet.RayFleet`` (Ray
actors on a cluster).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..host import gpu_lock
from ..rules.config import SandboxConfig
from . import devices
from ._parallel import side_by_side
from .pool import WorkerPool
from .supervisor import Worker


class Fleet:
    def __init__(self, config: SandboxConfig, cache_dir: Path, cache_env: dict[str, str]):
        self.config, self.cache_dir, self.cache_env = config, cache_dir, cache_env
        self.device: str | None = None
        self.run: WorkerPool | None = None
        self.compile: WorkerPool | None = None
        self.tmp: Path | None = None
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.cuda_arch = ""
        self.timing_lock = False  # run workers sharing a GPU time under its lock (set with the pools)

    @property
    def started(self) -> bool:
        return self.run is not None

    def start(self) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="kernels_env-"))
        atexit.register(self.close)
        try:
            self.run, self.compile = self._pools()
        except BaseException:
            self.close()
            raise
        failures: list[BaseException] = []

        def boot(pool: WorkerPool) -> None:
            try:
                pool.start()
            except BaseException as exc:  # re-raised below in the caller's thread
                failures.append(exc)

        side_by_side(boot, (self.run, self.compile))
        if failures:
            self.close()
            raise failures[0]
        self.cuda_arch = self._arch()
        workers = len(self.run.workers) + len(self.compile.workers) + 2
        self.executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="kernels_env")

    def _pools(self) -> tuple[WorkerPool, WorkerPool]:
        """The run and compile pools, not started yet; sets ``device``."""
        cfg = self.config
        self.device, gpus = devices.resolve(cfg.device, cfg.gpus)
        limit = int(cfg.memory_limit_gb * 2**30)
        run_env, compile_env = self.worker_envs()
        if self.device == "cuda":
            # By default one run worker per GPU: two would disturb each other's timings
            count = min(cfg.num_gpu_workers or len(gpus), len(gpus))
            slots = [{**run_env, "CUDA_VISIBLE_DEVICES": gpus[i]} for i in range(count)]
        else:
            slots = [run_env]
        # run_workers_per_gpu > 1: that many on each GPU (CPU mode: on the CPU); the default keeps the names
        # of one worker per GPU (run0, run1, ...). With exclusive_timing they share a lock per GPU.
        per = self.run_workers_per_gpu()
        self.timing_lock = gpu_lock.enabled(per, cfg.exclusive_timing, self.device)
        if self.timing_lock:
            for slot in slots:  # one lock per physical GPU, shared by its workers and their standbys
                slot[gpu_lock.ENV] = gpu_lock.lock_prefix(self.tmp, slot.get("CUDA_VISIBLE_DEVICES") or "cpu")
        names = [f"run{g}" if per == 1 else f"run{g}.{j}" for g in range(len(slots)) for j in range(per)]
        run_envs = [env for env in slots for _ in range(per)]

        def worker(role: str, device: str, env: dict[str, str], name: str) -> Worker:
            return Worker(role, device, env, self.tmp, name, limit, cfg.startup_timeout_s)

        runs = [worker("run", self.device, env, name) for env, name in zip(run_envs, names)]
        compiles = [
            worker("compile", "cpu", compile_env, f"compile{i}")
            for i in range(max(1, cfg.num_compile_workers))
        ]
        # one standby per run worker, on its GPU: the pool promotes a worker's own standby when it dies
        standbys = [worker("run", self.device, env, f"{name}-standby") for env, name in zip(run_envs, names)]
        run = WorkerPool(runs, cfg.max_requests_per_worker, standbys if cfg.standby_run_workers else [])
        return run, WorkerPool(compiles)

    def run_workers_per_gpu(self) -> int:
        per = self.config.run_workers_per_gpu
        if isinstance(per, bool) or not isinstance(per, int) or per < 1:
            raise ValueError(f"sandbox.run_workers_per_gpu must be an integer >= 1, got {per!r}")
        return per

    def worker_envs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(run worker, compile worker) environments; a CUDA run worker gets its GPU on top of its own."""
        common = {"TRITON_CACHE_DIR": str(self.cache_dir / "triton"), **self.cache_env}
        if self.device != "cuda":
            # The shared precompiled header (judge/build/pch.py): a detached 70 s g++ run, worth its time only
            # where throughput is measured; in CPU mode (laptops, CI) it stays off unless asked for.
            common["KERNELS_ENV_PCH"] = os.environ.get("KERNELS_ENV_PCH", "off")
        prestart = "1" if self.config.prestart_profiler else "0"
        run = {**common, "KERNELS_ENV_BUILD_ONLY": "0", "KERNELS_ENV_PROFILE_PRESTART": prestart}
        if self.device != "cuda":
            run.update(CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1")
        return run, {**common, "CUDA_VISIBLE_DEVICES": "", "KERNELS_ENV_BUILD_ONLY": "1"}

    def _arch(self) -> str:
        if self.config.cuda_arch != "auto":
            return self.config.cuda_arch
        envs = self.run.environments() if self.run else []
        return next((e["compute_capability"] for e in envs if e.get("compute_capability")), "9.0")

    def environment(self) -> dict[str, Any]:
        envs = self.run.environments() if self.run else []
        return envs[0] if envs else {}

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.executor = None
        side_by_side(lambda pool: pool.close(), [p for p in (self.run, self.compile) if p is not None])
        self.run = self.compile = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
