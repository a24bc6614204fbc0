"""The GPU runtime-window stage: real eager medians, through the sandbox client (or a fallback timer).

The sandbox (``kernels_env``) owns GPU timing; research reaches it only through ``kernels_env.client``. The
import is guarded so the data pipeline runs (CPU stages) where the sandbox is not installed. The ``direct``
timer is a documented fallback for machines without the sandbox: CUDA-event medians of eager in a worker
process, without the judge's L2 flush and input rotation.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from .config import GpuFilterConfig
from .records import TaskRecord


class Timer(Protocol):
    def time(self, record: TaskRecord) -> dict[str, Any]:
        """{ok, gpu, eager_ms, timings} on success, else {ok: False, reason, detail}."""
        ...

    def close(self) -> None: ...


def _median(timings: dict, mode: str) -> float | None:
    entry = timings.get(mode)
    if isinstance(entry, dict):
        v = entry.get("median_ms")
        return float(v) if v is not None else None
    return None


class SandboxTimer:
    """Calls ``client.baseline(reference=source)`` on any object with that method (a fake in unit tests)."""

    def __init__(self, client: Any, gpu_name: str | None = None):
        self.client, self.gpu_name = client, gpu_name

    def time(self, record: TaskRecord) -> dict[str, Any]:
        try:
            base = self.client.baseline(reference=record.source)
        except Exception as exc:  # the sandbox reports; one task's failure never stops the run
            return {"ok": False, "reason": "gpu_error", "detail": repr(exc)[:500]}
        if dataclasses.is_dataclass(base) and not isinstance(base, type):
            base = dataclasses.asdict(base)
        elif hasattr(base, "to_dict"):
            base = base.to_dict()
        if not isinstance(base, dict):
            return {"ok": False, "reason": "gpu_error", "detail": f"baseline returned {type(base).__name__}"}
        timings = base.get("timings") or {}
        eager = _median(timings, "eager")
        if eager is None:
            detail = base.get("status") or base.get("messages") or "no eager median in the baseline result"
            return {"ok": False, "reason": "gpu_error", "detail": str(detail)[:500]}
        env = base.get("environment") or {}
        gpu = self.gpu_name or env.get("gpu") or env.get("gpu_name") or "cuda"
        medians = {f"{m}_ms": _median(timings, m) for m in timings if _median(timings, m) is not None}
        return {"ok": True, "gpu": gpu, "eager_ms": eager, "timings": medians}

    def close(self) -> None:
        pass


class _ClientTimer(SandboxTimer):
    def __init__(self, cfg: GpuFilterConfig):
        try:
            from kernels_env import client as sandbox
        except ImportError as exc:
            raise RuntimeError(
                "filters.gpu.timer=sandbox needs kernels_env.client (the sandbox); it is not importable here "
                f"({exc}). Use filters.gpu.timer=direct for the fallback CUDA-event timer."
            ) from None
        # research may only touch kernels_env.client: take SandboxConfig from there when it re-exports it
        # (code outside research can build the client itself and pass SandboxTimer(client)).
        config_cls = getattr(sandbox, "SandboxConfig", None)
        self._cm = sandbox.SandboxClient(config_cls(device="cuda")) if config_cls else sandbox.SandboxClient()
        super().__init__(self._cm.__enter__(), cfg.gpu_name)

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


class DirectTimer:
    """Fallback: eager CUDA-event median in an isolated worker (``checks.time_eager_cuda``)."""

    def __init__(self, cfg: GpuFilterConfig):
        from .pool import WorkerPool

        self.cfg = cfg
        self.pool = WorkerPool("research.data.checks:time_eager_cuda", 1, cfg.timeout_s, max_tasks=100)

    def time(self, record: TaskRecord) -> dict[str, Any]:
        self.pool.submit(record.id, {"source": record.source})
        while True:
            for _, res in self.pool.poll(1.0):
                if not res.get("ok"):
                    return res
                eager = res["timings"]["eager"]["median_ms"]
                return {
                    "ok": True,
                    "gpu": self.cfg.gpu_name or res["gpu"],
                    "eager_ms": eager,
                    "timings": {"eager_ms": eager},
                    "timer": "direct",
                }

    def close(self) -> None:
        self.pool.close()


def make_timer(cfg: GpuFilterConfig) -> Timer:
    if cfg.timer == "sandbox":
        return _ClientTimer(cfg)
    if cfg.timer == "direct":
        return DirectTimer(cfg)
    raise ValueError(f"unknown filters.gpu.timer {cfg.timer!r} (sandbox | direct)")


def apply_window(record: TaskRecord, result: dict[str, Any], lo: float, hi: float) -> tuple[str | None, str]:
    """Store the measured baselines on the record; return (drop reason or None, detail)."""
    if not result.get("ok"):
        return result.get("reason", "gpu_error"), result.get("detail", "")
    record.baselines[result["gpu"]] = {k: round(v, 5) for k, v in result["timings"].items()}
    ms = result["eager_ms"]
    if not lo <= ms <= hi:
        return "runtime_window", f"eager {ms:.3f} ms on {result['gpu']} outside [{lo}, {hi}] ms"
    return None, ""
