"""The client's side of the Ray backend: sandbox actors (``ray_actor.SandboxActor``) behind the interface of
``pool.WorkerPool`` (``start``, ``acquire()`` yielding a handle with ``call(request, timeout_s)``,
``environments``, ``close``), so the client's evaluate / tool / baseline code is the same for both backends.

Failures inside an actor (its worker crashed, hung, ran out of memory, forged a reply) are handled there, by
the actor's own ``WorkerPool``, and come back as the same ``WorkerFailure``. What only this side can see is
the actor itself dying (``ray.kill``, its node lost, the actor process killed): the request it was serving
gets a ``WorkerFailure`` ("crash", so the usual verdict), and a fresh actor is started in the background in
its place; every other actor and request carries on.

Ray is imported only when a pool is started (``import kernels_env`` never loads it).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..rules import messages
from ._idle import IdleWorkers
from .errors import SandboxError, WorkerFailure

# Beyond the worker's own deadline: Ray's transfer and scheduling, and an actor's pool waiting for the restart
# of a worker the previous request killed (bounded by the startup timeout, added separately).
CALL_SLACK_S = 60.0
RESTART_ATTEMPTS = 3


def ray_module():
    try:
        import ray
    except ImportError as exc:
        raise SandboxError(
            f"SandboxConfig(backend='ray') needs the ray package (requirements.txt pins it): {exc}"
        ) from None
    return ray


def _why(exc: BaseException) -> str:
    """The first lines of a Ray error (its full text repeats the remote traceback)."""
    cause = getattr(exc, "cause", None)
    text = str(cause if isinstance(cause, BaseException) else exc).strip()
    return "\n".join(text.splitlines()[:6]) or type(exc).__name__


class RayWorker:
    """One sandbox actor as the pool hands it out: ``call`` behaves like ``supervisor.Worker.call``."""

    def __init__(self, name: str, actor: Any, generation: int, info: dict[str, Any], wait_s: float):
        self.name, self.actor, self.generation, self.info = name, actor, generation, info
        self.wait_s = wait_s  # on top of a request's timeout (see CALL_SLACK_S)
        self.dead = False
        self.requests = 0

    @property
    def actor_id(self) -> str:
        return self.actor._actor_id.hex()

    def call(self, request: Any, timeout_s: float) -> messages.Reply:
        ray = ray_module()
        self.requests += 1
        ref = self.actor.call.remote(messages.encode(request), timeout_s)
        try:
            out = ray.get(ref, timeout=timeout_s + self.wait_s)
        except ray.exceptions.RayActorError as exc:
            self.dead = True
            raise WorkerFailure(
                "crash", f"the Ray actor of the {self.name} worker died ({_why(exc)}); it was replaced"
            ) from None
        except ray.exceptions.GetTimeoutError:
            self.dead = True  # the actor stopped answering (a hung node): it must not serve again
            with contextlib.suppress(Exception):
                ray.kill(self.actor, no_restart=True)
            raise WorkerFailure(
                "timeout",
                f"exceeded the {timeout_s:g} s limit (the Ray actor of the {self.name} worker stopped "
                "answering; it was replaced)",
            ) from None
        except ray.exceptions.RayError as exc:  # the actor's own code failed: the sandbox's fault
            raise SandboxError(f"the Ray actor of the {self.name} worker failed: {_why(exc)}") from None
        if "failure" in out:
            raise WorkerFailure(**out["failure"])
        if "sandbox_error" in out:
            self.dead = True  # its worker cannot be restarted there; a fresh actor may land elsewhere
            raise SandboxError(out["sandbox_error"])
        return messages.decode(out["reply"])


class RayWorkerPool(IdleWorkers[RayWorker]):
    """Hands out one idle actor per request; a dead actor is killed and replaced in the background."""

    def __init__(self, spawn: Callable[[str, int], Any], names: list[str], startup_timeout_s: float):
        super().__init__()
        self._spawn = spawn  # (worker name, generation) -> a new actor handle, not started yet
        self.names = names
        self.startup_timeout_s = startup_timeout_s
        self.workers: list[RayWorker] = []
        self._busy: list[RayWorker] = []

    def _wait_s(self) -> float:
        return self.startup_timeout_s + CALL_SLACK_S

    def start(self) -> None:
        """Start one actor per name and wait until each has started its worker."""
        ray = ray_module()
        actors = [self._spawn(name, 0) for name in self.names]
        refs = [a.start.remote() for a in actors]
        try:
            infos = ray.get(refs, timeout=self._wait_s())
        except ray.exceptions.GetTimeoutError:
            self._kill(actors)
            raise SandboxError(
                f"the Ray actors {self.names} were not all placed and started within {self._wait_s():g} s "
                f"(cluster resources: {ray.cluster_resources()}; each actor reserves the CPUs of "
                "ray_cpus_per_actor, a GPU run actor one GPU)"
            ) from None
        except ray.exceptions.RayError as exc:
            self._kill(actors)
            raise SandboxError(f"a sandbox Ray actor did not start: {_why(exc)}") from None
        self.workers = [RayWorker(n, a, 0, i, self._wait_s()) for n, a, i in zip(self.names, actors, infos)]
        for w in self.workers:
            self._idle.put(w)

    @contextlib.contextmanager
    def acquire(self) -> Iterator[RayWorker]:
        worker = self._next_idle()
        with self._lock:
            self._busy.append(worker)
        try:
            yield worker
        finally:
            with self._lock:
                self._busy.remove(worker)
            if not worker.dead:
                self._idle.put(worker)
            elif not self._closed:
                self._replace(worker)

    def _replace(self, worker: RayWorker) -> None:
        self._kill([worker.actor])  # first: its GPU is what the replacement needs
        threading.Thread(target=self._restart, args=(worker,), daemon=True).start()

    def _restart(self, old: RayWorker) -> None:
        ray = ray_module()
        last = ""
        for attempt in range(RESTART_ATTEMPTS):
            generation = old.generation + 1 + attempt
            actor = self._spawn(old.name, generation)
            try:
                info = ray.get(actor.start.remote(), timeout=self._wait_s())
            except Exception as exc:  # retried; the last reason is reported
                last = _why(exc)
                self._kill([actor])
                time.sleep(1 + attempt)
                continue
            new = RayWorker(old.name, actor, generation, info, self._wait_s())
            with self._lock:
                closed = self._closed
                if not closed:
                    self.workers[self.workers.index(old)] = new
                    self._idle.put(new)
            if closed:
                self._kill([actor])
            return
        self._error = f"the Ray actor of the {old.name} worker could not be replaced: {last}"

    def in_use(self) -> list[RayWorker]:
        """The actors serving a request now (to watch or drain a fleet)."""
        with self._lock:
            return list(self._busy)

    def environments(self) -> list[dict[str, Any]]:
        return [w.info.get("environment") or {} for w in self.workers]

    def close(self) -> None:
        ray = ray_module()
        with self._lock:
            self._closed = True
            workers = list(self.workers)
        # Ask every actor to stop its workers (in parallel), then kill it: a worker also exits by itself
        # when its actor process is gone (the worker watches its parent).
        refs = []
        for w in workers:
            with contextlib.suppress(Exception):
                refs.append(w.actor.close.remote())
        if refs:
            with contextlib.suppress(Exception):
                ray.wait(refs, num_returns=len(refs), timeout=15.0)
        self._kill([w.actor for w in workers])

    @staticmethod
    def _kill(actors: list[Any]) -> None:
        ray = ray_module()
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
