"""The GPU runtime-window stage: real eager medians, measured by the sandbox.

The sandbox (``kernels_env``) owns GPU timing (CUDA events, L2 flush, rotated inputs); research reaches it
only through ``kernels_env.client``, so every number in a dataset comes from the same timer as the judge's.
"""

from __future__ import annotations

from typing import Any, Protocol

from .config import GpuFilterConfig
from .records import TaskRecord


class Timer(Protocol):
    def time(self, record: TaskRecord) -> dict[str, Any]:
        """{ok, gpu, eager_ms, timings} on success, else {ok: False, reason, detail}."""
        ...

    def close(self) -> None: ...


def eager_only_judge(client_module: Any, cfg: GpuFilterConfig) -> Any:
    """A judge that times only eager, with the shortened timing the window needs."""
    timing = client_module.TimingConfig(
        warmup_iters=cfg.warmup_iters,
        min_iters=cfg.min_iters,
        max_iters=cfg.max_iters,
        target_time_s=cfg.target_time_s,
    )
    return client_module.JudgeConfig(baselines=["eager"], timing=timing)


class SandboxTimer:
    """Times a task with ``client.baseline(reference=source, judge=judge)`` (a fake client in unit tests)."""

    def __init__(self, client: Any, gpu_name: str | None = None, judge: Any = None):
        self.client, self.gpu_name, self.judge = client, gpu_name, judge

    def time(self, record: TaskRecord) -> dict[str, Any]:
        try:
            base = self.client.baseline(reference=record.source, judge=self.judge)
        except Exception as exc:  # the sandbox reports; one task's failure never stops the run
            return {"ok": False, "reason": "gpu_error", "detail": f"{type(exc).__name__}: {exc}"[:500]}
        modes = base.get("baselines") or {}
        eager = (modes.get("eager") or {}).get("median_ms")
        if eager is None:
            detail = (modes.get("eager") or {}).get("error") or "no eager median in the sandbox's baselines"
            return {"ok": False, "reason": "gpu_error", "detail": str(detail)[:500]}
        if not base.get("comparable", True):
            return {
                "ok": False,
                "reason": "gpu_error",
                "detail": "sandbox timings are not comparable (CPU mode)",
            }
        gpu = self.gpu_name or (getattr(self.client, "environment", None) or {}).get("gpu") or "cuda"
        medians = {f"{m}_ms": v["median_ms"] for m, v in modes.items() if v.get("median_ms") is not None}
        return {"ok": True, "gpu": gpu, "eager_ms": float(eager), "timings": medians}

    def close(self) -> None:
        pass


class _ClientTimer(SandboxTimer):
    """Owns a sandbox client on the GPU for the duration of a synthesis run."""

    def __init__(self, cfg: GpuFilterConfig):
        from kernels_env import client as sandbox

        config = sandbox.SandboxConfig(device="cuda", baseline_timeout_s=cfg.timeout_s)
        self._client = sandbox.SandboxClient(config)
        self._client.start()
        super().__init__(self._client, cfg.gpu_name, eager_only_judge(sandbox, cfg))

    def close(self) -> None:
        self._client.close()


def make_timer(cfg: GpuFilterConfig) -> Timer:
    return _ClientTimer(cfg)


def apply_window(record: TaskRecord, result: dict[str, Any], lo: float, hi: float) -> tuple[str | None, str]:
    """Store the measured baselines on the record; return (drop reason or None, detail)."""
    if not result.get("ok"):
        return result.get("reason", "gpu_error"), result.get("detail", "")
    record.baselines[result["gpu"]] = {k: round(v, 5) for k, v in result["timings"].items()}
    ms = result["eager_ms"]
    if not lo <= ms <= hi:
        return "runtime_window", f"eager {ms:.3f} ms on {result['gpu']} outside [{lo}, {hi}] ms"
    return None, ""
