"""Bottleneck label for one kernel from its Nsight Compute metrics, with the evidence that decided it.

Rules follow Nsight Compute's own Speed-of-Light guidance: a unit at >= 60% of its peak is the limiter;
when neither memory nor compute reaches that, the kernel does not issue enough work to hide latency
(low achieved occupancy, a grid smaller than the GPU, or stalls), unless it is so short that the launch
itself dominates.
"""

from __future__ import annotations

from dataclasses import dataclass

LABELS = ("memory-bound", "compute-bound", "latency/occupancy-bound", "launch-bound", "unknown")


@dataclass(frozen=True)
class Thresholds:
    busy_pct: float = 60.0  # a unit this busy (of peak) is the limiter
    launch_us: float = 5.0  # kernels shorter than this are dominated by launch overhead (~2-4 us) ...
    launch_busy_pct: float = 40.0  # ... when no unit is busy either
    low_occupancy_pct: float = 25.0


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.0f}%"


def classify(k: dict, t: Thresholds | None = None) -> tuple[str, list[str]]:
    """``k``: the dict of ``_ncu.kernel_metrics``. Returns (label, evidence sentences)."""
    t = t or Thresholds()
    mem_parts = [v for v in (k.get("dram_pct"), k.get("memory_pct")) if v is not None]
    comp_parts = [v for v in (k.get("sm_pct"), k.get("tensor_pct")) if v is not None]
    if not mem_parts and not comp_parts:
        return "unknown", ["no throughput metrics were collected (ncu sections missing)"]
    mem = max(mem_parts) if mem_parts else 0.0
    comp = max(comp_parts) if comp_parts else 0.0
    dur = k.get("duration_us")
    tput = f"memory {_pct(mem)} (DRAM {_pct(k.get('dram_pct'))}), SM {_pct(k.get('sm_pct'))}"
    if k.get("tensor_pct") is not None:
        tput += f", tensor pipe {_pct(k.get('tensor_pct'))}"
    tput += " of peak"
    if dur is not None and dur < t.launch_us and max(mem, comp) < t.launch_busy_pct:
        return "launch-bound", [
            f"kernel runs {dur:.1f} us (< {t.launch_us:.0f} us): a launch costs ~2-4 us, so launch overhead "
            f"dominates; fuse it with its neighbours or do more work per launch",
            f"throughput is low: {tput}",
        ]
    if mem >= t.busy_pct or comp >= t.busy_pct:
        if mem >= comp:
            ev = [
                f"memory throughput {_pct(mem)} of peak >= {t.busy_pct:.0f}% while compute is at {_pct(comp)}"
            ]
            dram = k.get("dram_pct")
            if dram is not None and dram < mem - 15:
                ev.append(
                    f"DRAM is only at {_pct(dram)}: the pressure is on L1/L2/shared memory, not HBM "
                    f"(L1 hit {_pct(k.get('l1_hit_pct'))}, L2 hit {_pct(k.get('l2_hit_pct'))})"
                )
            elif k.get("dram_gbps") is not None:
                ev.append(f"achieved DRAM bandwidth {k['dram_gbps']:.0f} GB/s")
            if comp >= t.busy_pct:
                ev.append(f"compute is also busy ({_pct(comp)}): the kernel is near both roofs")
            return "memory-bound", ev
        ev = [f"compute throughput {_pct(comp)} of peak >= {t.busy_pct:.0f}% while memory is at {_pct(mem)}"]
        if k.get("tensor_pct") is not None:
            ev.append(f"tensor pipe {_pct(k['tensor_pct'])}, SM {_pct(k.get('sm_pct'))}")
        if mem >= t.busy_pct:
            ev.append(f"memory is also busy ({_pct(mem)}): the kernel is near both roofs")
        return "compute-bound", ev
    ev = [
        f"neither memory ({_pct(mem)}) nor compute ({_pct(comp)}) reaches {t.busy_pct:.0f}% of peak: "
        f"latency is not hidden"
    ]
    occ, theo = k.get("achieved_occupancy_pct"), k.get("theoretical_occupancy_pct")
    if occ is not None:
        s = f"achieved occupancy {_pct(occ)}"
        if theo is not None:
            s += f" (theoretical {_pct(theo)}"
            if k.get("occupancy_limiter"):
                s += f", limited by {k['occupancy_limiter']}"
            s += ")"
        if occ < t.low_occupancy_pct:
            s += ": too few warps to hide latency"
        ev.append(s)
    grid, sms = k.get("grid_size"), k.get("sm_count")
    if grid is not None and sms and grid < sms:
        ev.append(f"grid of {grid:.0f} blocks < {sms:.0f} SMs: part of the GPU is idle")
    elif k.get("waves_per_sm") is not None and 0 < k["waves_per_sm"] < 1:
        ev.append(f"{k['waves_per_sm']:.2f} waves per SM: part of the GPU is idle")
    if k.get("registers_per_thread"):
        ev.append(f"{k['registers_per_thread']:.0f} registers/thread")
    return "latency/occupancy-bound", ev
