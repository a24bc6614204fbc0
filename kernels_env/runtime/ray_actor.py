"""The body of one Ray actor of the sandbox fleet (``ray_fleet``): a sandbox worker on the actor's node.

The actor owns a ``WorkerPool`` of one worker process (plus its standby, when configured): the same worker,
wire protocol, limits, verdict-bearing failures and crash recovery as the local backend, merely started by
an actor on whichever node Ray placed it. Requests arrive as protocol lines (``messages.encode``) and leave
as a reply line or a ``WorkerFailure``'s fields, so nothing but the protocol crosses the Ray boundary.

No shared filesystem is assumed: the client names paths on its own machine (its temp directory for request
workdirs, its cache directory), and the actor maps them onto directories of its node, removing each
request's workdir after the reply (the client's own clean-up runs on the client's machine). This module
never imports Ray: the client wraps the class with ``ray.remote``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from ..rules import messages
from .errors import SandboxError, WorkerFailure
from .pool import WorkerPool
from .supervisor import Worker


class SandboxActor:
    def __init__(self, spec: dict[str, Any]):
        """``spec``: ``role``, ``device``, ``name``, ``env`` (with the client's paths), ``client_tmp``,
        ``client_cache`` (the client's resolved cache directory), ``cache_dir`` (the configured, unexpanded
        one: ``~`` means this node's home), ``memory_limit_bytes``, ``startup_timeout_s``,
        ``max_requests``, ``standby``."""
        self.name = spec["name"]
        self.tmp = Path(tempfile.mkdtemp(prefix=f"kernels_env-{self.name}-"))
        cache = Path(os.path.expanduser(spec["cache_dir"])).resolve()
        cache.mkdir(parents=True, exist_ok=True)
        # Longest prefix first, so a cache inside the client's temp directory still maps onto the cache.
        pairs = [(spec["client_tmp"], str(self.tmp)), (spec["client_cache"], str(cache))]
        self._paths = sorted(pairs, key=lambda p: -len(p[0]))
        env = {k: self._local(v) for k, v in spec["env"].items()}

        def worker(name: str) -> Worker:
            return Worker(
                spec["role"],
                spec["device"],
                env,
                self.tmp,
                name,
                spec["memory_limit_bytes"],
                spec["startup_timeout_s"],
            )

        standbys = [worker(f"{self.name}-standby")] if spec.get("standby") else []
        self.pool = WorkerPool([worker(self.name)], spec.get("max_requests", 0), standbys)

    def start(self) -> dict[str, Any]:
        """Start the worker (blocking); raises ``SandboxError`` (to the client, as a Ray task error) when it
        does not start."""
        self.pool.start()
        envs = self.pool.environments()
        return {"environment": envs[0] if envs else {}, "node": socket.gethostname(), "pid": os.getpid()}

    def call(self, line: bytes, timeout_s: float) -> dict[str, Any]:
        """One request: ``{"reply": line}``, ``{"failure": WorkerFailure fields}`` (the worker died, hung or
        was forged; the pool replaced it) or ``{"sandbox_error": text}`` (its worker cannot be restarted)."""
        request = messages.decode(line)
        self._localize(request)
        try:
            with self.pool.acquire() as worker:
                reply = worker.call(request, timeout_s)
            return {"reply": messages.encode(reply)}
        except WorkerFailure as exc:
            fields = ("kind", "detail", "stage", "log_tail", "evidence")
            return {"failure": {f: getattr(exc, f) for f in fields}}
        except SandboxError as exc:
            return {"sandbox_error": str(exc)}
        finally:
            workdir = getattr(request, "workdir", "")
            if workdir.startswith(str(self.tmp) + os.sep):  # only what this actor made for the request
                shutil.rmtree(workdir, ignore_errors=True)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.pool.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _local(self, value: Any) -> Any:
        """A client path under its temp or cache directory, as the same path on this node."""
        if not isinstance(value, str):
            return value
        for client, local in self._paths:
            if value == client or value.startswith(client.rstrip(os.sep) + os.sep):
                return local + value[len(client) :]
        return value

    def _localize(self, request: Any) -> None:
        for field in ("workdir", "cache_dir"):  # the request's own directory; a baseline's timing cache
            if hasattr(request, field):
                setattr(request, field, self._local(getattr(request, field)))
        if isinstance(getattr(request, "env", None), dict):
            request.env = {k: self._local(v) for k, v in request.env.items()}
        if isinstance(getattr(request, "args", None), dict):  # tools: their cache (roofline ceilings)
            request.args = {k: self._local(v) for k, v in request.args.items()}
