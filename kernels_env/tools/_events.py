"""The cheap profile: no Nsight Compute. Per-launch device time from the PyTorch profiler (CUPTI activity
records) plus CUDA-event wall time per forward; on a CPU-only machine, per-op CPU time instead.

It cannot tell why a kernel is slow, only where the time goes, whether the GPU idles between launches
(launch-bound) and, with the roofline, how far the candidate is from the floor.
"""

from __future__ import annotations

import statistics

from ._resources import short_kernel_name


def profile_forward(model, inputs, *, device: str, warmup: int = 3, iters: int = 10) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = str(device).startswith("cuda")
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        if cuda:
            torch.cuda.synchronize()
        wall_ms = []
        for _ in range(iters):
            if cuda:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                model(*inputs)
                e.record()
                e.synchronize()
                wall_ms.append(s.elapsed_time(e))
            else:
                import time

                t0 = time.perf_counter()
                model(*inputs)
                wall_ms.append((time.perf_counter() - t0) * 1e3)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            for _ in range(iters):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize()
    kernels: dict[str, dict] = {}
    for ev in prof.events():
        if cuda:
            if not str(getattr(ev, "device_type", "")).endswith("CUDA"):
                continue
            dur_us = ev.time_range.elapsed_us()
        else:
            if ev.cpu_parent is not None:  # top-level ops only: children's time is inside their parent's
                continue
            dur_us = ev.cpu_time_total
        if dur_us is None:
            continue
        rec = kernels.setdefault(
            ev.name,
            {"name": ev.name, "short_name": short_kernel_name(ev.name), "launches": 0, "total_us": 0.0},
        )
        rec["launches"] += 1
        rec["total_us"] += dur_us
    total = sum(k["total_us"] for k in kernels.values())
    out = []
    for k in sorted(kernels.values(), key=lambda r: -r["total_us"]):
        k["launches_per_forward"] = k["launches"] / iters
        k["us_per_forward"] = k["total_us"] / iters
        k["mean_us"] = k["total_us"] / k["launches"]
        k["share_pct"] = 100.0 * k["total_us"] / total if total else 0.0
        out.append(k)
    fwd_ms = statistics.median(wall_ms) if wall_ms else None
    busy_us = total / iters
    result = {
        "unit": "cuda kernels" if cuda else "cpu ops (no GPU: timings are not comparable)",
        "forward_us": fwd_ms * 1e3 if fwd_ms is not None else None,
        "kernel_us_per_forward": busy_us,
        "launches_per_forward": sum(k["launches"] for k in out) / iters,
        "kernels": out,
    }
    if cuda and fwd_ms:
        idle = max(0.0, 1.0 - busy_us / (fwd_ms * 1e3))
        result["gpu_idle_pct"] = 100.0 * idle
        if idle > 0.5:
            result["bottleneck"] = "launch-bound"
            result["evidence"] = [
                f"the GPU is idle {100 * idle:.0f}% of the forward ({busy_us:.1f} us of kernels "
                f"in {fwd_ms * 1e3:.1f} us): host and launch overhead dominate"
            ]
    return result
