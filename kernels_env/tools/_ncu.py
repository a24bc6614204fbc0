"""Nsight Compute: find the binary, build a bounded command, parse its CSV, summarise each kernel.

Parses both CSV layouts ncu writes: ``--page raw`` (wide: a header row of metric names, a units row, one
row per kernel launch) and ``--page details`` (long: one row per metric with "Metric Name", "Metric Unit",
"Metric Value"; names are labels such as "DRAM Throughput", mapped to raw metric names). Values may carry
thousands separators ("1,024"); units are normalised to ns, bytes,
bytes/s and percent so the parser does not depend on ``--print-units``.
"""

from __future__ import annotations

import csv
import glob
import io

from ..host.cuda import find_cuda_tool
from ._resources import short_kernel_name

NVTX_RANGE = "kernels_env_profile"
# torch.cuda._sleep launches ``spin_kernel``: the marker between the reference's and the candidate's launches.
MARKER_CYCLES = 1000
MARKER_KERNEL = "spin_kernel"
TENSOR_PIPES = r"regex:^sm__pipe_tensor_op_\w+_cycles_active\.avg\.pct_of_peak_sustained_active$"
# What the summary reads (``kernel_metrics``; through it the bottleneck label, the evidence and the text),
# collected by name: ncu then replays each kernel only for these, not for the hundreds of metrics of the four
# sections below (11 replay passes per kernel on an H200, tests/tools/fixtures/real/). Every name is in the
# real H200 capture; tests/tools/test_ncu_and_bottleneck.py pins this list to what the parser reads (a field
# the summary uses but nobody collects fails it, so does a metric collected for nothing).
SUMMARY_METRICS = (
    "gpu__time_duration.sum",  # duration_us
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",  # dram_pct
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",  # memory_pct
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",  # sm_pct
    TENSOR_PIPES,  # tensor_pct
    "dram__bytes_read.sum",  # dram_bytes (read + write)
    "dram__bytes_write.sum",
    "dram__bytes.sum.per_second",  # dram_gbps
    "sm__warps_active.avg.pct_of_peak_sustained_active",  # achieved occupancy
    "sm__maximum_warps_per_active_cycle_pct",  # theoretical occupancy
    "launch__occupancy_limit_registers",  # the occupancy limiter and the block limits
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks",
    "launch__occupancy_limit_barriers",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__block_size",
    "launch__grid_size",
    "launch__waves_per_multiprocessor",
    "launch__sm_count",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
)
# The fallback when a name in SUMMARY_METRICS does not resolve (another ncu or GPU): whole sections, which
# carry the same fields under their own names (the previous default, one attempt more, cold).
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis")
_ID_COLUMNS = {
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "Kernel Time",
    "Section Name",
}
_SCALE = {
    "nsecond": 1.0,
    "ns": 1.0,
    "usecond": 1e3,
    "us": 1e3,
    "msecond": 1e6,
    "ms": 1e6,
    "second": 1e9,
    "s": 1e9,
    "byte": 1.0,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "Tbyte": 1e12,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "KiB": 1024.0,
    "MiB": 1024.0**2,
    "GiB": 1024.0**3,
    "byte/second": 1.0,
    "byte/s": 1.0,
    "Kbyte/second": 1e3,
    "Mbyte/second": 1e6,
    "Gbyte/second": 1e9,
    "Tbyte/second": 1e12,
    "KB/s": 1e3,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "TB/s": 1e12,
    "Kbyte/s": 1e3,
    "Mbyte/s": 1e6,
    "Gbyte/s": 1e9,
    "Tbyte/s": 1e12,
    "cycle/nsecond": 1.0,
    "cycle/usecond": 1e-3,
    "cycle/second": 1e-9,
}


def find_ncu() -> str | None:
    """``$KERNELS_ENV_NCU``, ``ncu`` on PATH, the CUDA toolkit's, or the newest /opt/nvidia/nsight-compute."""
    nsight = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    return find_cuda_tool("ncu", "KERNELS_ENV_NCU", nsight)


def ncu_command(
    ncu: str,
    target: list[str],
    log_file: str,
    *,
    launch_count: int = 32,
    kernel_regex: str | None = None,
    nvtx_range: str | None = NVTX_RANGE,
    sections: bool = False,
    metrics: bool = True,
) -> list[str]:
    """Profile only kernels launched inside the NVTX push/pop range (the candidate's timed forward),
    at most ``launch_count`` launches, at the GPU's own clocks (``--clock-control none``), collecting
    ``SUMMARY_METRICS`` (``metrics``) and/or ``SECTIONS`` (``sections``): the profile tool collects the
    metrics alone, its fallback the sections alone (scripts/gpu_profiler.sh captures both). No rules: the
    raw page never shows their results."""
    cmd = [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--clock-control",
        "none",
        "--apply-rules",
        "no",
        "--launch-count",
        str(launch_count),
        "--log-file",
        log_file,
        "-f",
        # The target alone: children (ninja checking a cached load_inline build, compilers) run kernels
        # outside the NVTX range anyway, and every injected child slows the call.
        "--target-processes",
        "application-only",
    ]
    if nvtx_range:
        cmd += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    if kernel_regex:
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]
    for section in SECTIONS if sections else ():
        cmd += ["--section", section]
    if metrics:
        cmd += ["--metrics", ",".join(SUMMARY_METRICS)]
    return cmd + list(target)


def _number(text: str):
    t = (text or "").strip().replace(",", "")
    if t in ("", "n/a", "N/A", "nan"):
        return None
    try:
        return float(t)
    except ValueError:
        return text.strip()


def _normalise(value, unit: str):
    if not isinstance(value, float):
        return value
    if unit in _SCALE:
        return value * _SCALE[unit]
    for per in ("/block", "/thread", "/warp", "/launch"):  # e.g. "Kbyte/block" -> scale of "Kbyte"
        if unit.endswith(per) and unit[: -len(per)] in _SCALE:
            return value * _SCALE[unit[: -len(per)]]
    return value


def _csv_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(body))))


def parse_ncu_csv(text: str) -> list[dict]:
    """One record per profiled launch, in launch order: id, name, short_name, block, grid, device, cc,
    metrics ({metric: value in base units}), units ({metric: unit as printed})."""
    rows = _csv_rows(text)
    if not rows:
        return []
    header = rows[0]
    if "Metric Name" in header:
        return _parse_long(header, rows[1:])
    return _parse_wide(header, rows[1:])


def _record(cols: dict[str, str]) -> dict:
    name = cols.get("Kernel Name", "")
    return {
        "id": int(_number(cols.get("ID", "0")) or 0),
        "name": name,
        "short_name": short_kernel_name(name),
        "block": cols.get("Block Size"),
        "grid": cols.get("Grid Size"),
        "device": cols.get("Device"),
        "cc": cols.get("CC"),
        "metrics": {},
        "units": {},
    }


def _parse_wide(header: list[str], rows: list[list[str]]) -> list[dict]:
    units = {}
    out = []
    for row in rows:
        if len(row) != len(header):
            continue
        cols = dict(zip(header, row))
        if not cols.get("ID", "").strip():  # the units row
            units = cols
            continue
        rec = _record(cols)
        for name, raw in cols.items():
            if name in _ID_COLUMNS:
                continue
            unit = (units.get(name) or "").strip()
            rec["metrics"][name] = _normalise(_number(raw), unit)
            rec["units"][name] = unit
        out.append(rec)
    return out


# ``--page details`` prints each metric under its label (``--print-metric-name label``, the default); the
# raw names the summary reads, by (label, unit kind). Checked against real ncu 2025.3 output
# (tests/tools/fixtures/real/ncu_details_membound.csv) for the SpeedOfLight and Occupancy sections.
DETAILS_LABELS = {
    ("Duration", "time"): "gpu__time_duration.sum",
    ("DRAM Throughput", "%"): "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    ("Memory Throughput", "%"): "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    ("Memory Throughput", "rate"): "dram__bytes.sum.per_second",
    ("Compute (SM) Throughput", "%"): "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    ("Achieved Occupancy", "%"): "sm__warps_active.avg.pct_of_peak_sustained_active",
    ("Theoretical Occupancy", "%"): "sm__maximum_warps_per_active_cycle_pct",
    ("Block Limit Registers", "count"): "launch__occupancy_limit_registers",
    ("Block Limit Shared Mem", "count"): "launch__occupancy_limit_shared_mem",
    ("Block Limit Warps", "count"): "launch__occupancy_limit_warps",
    ("Block Limit SM", "count"): "launch__occupancy_limit_blocks",
    ("Block Limit Barriers", "count"): "launch__occupancy_limit_barriers",
    ("Registers Per Thread", "count"): "launch__registers_per_thread",
    ("Block Size", "count"): "launch__block_size",
    ("Grid Size", "count"): "launch__grid_size",
    ("Waves Per SM", "count"): "launch__waves_per_multiprocessor",
    ("Static Shared Memory Per Block", "bytes"): "launch__shared_mem_per_block_static",
    ("Dynamic Shared Memory Per Block", "bytes"): "launch__shared_mem_per_block_dynamic",
    ("# SMs", "count"): "launch__sm_count",
    ("L1/TEX Hit Rate", "%"): "l1tex__t_sector_hit_rate.pct",
    ("L2 Hit Rate", "%"): "lts__t_sector_hit_rate.pct",
}


def _unit_kind(unit: str) -> str:
    if unit == "%":
        return "%"
    if unit.endswith(("/second", "/s")):
        return "rate"
    if unit in ("nsecond", "ns", "usecond", "us", "msecond", "ms", "second", "s"):
        return "time"
    if "byte" in unit.lower() or unit in ("KB", "MB", "GB", "KiB", "MiB", "GiB"):
        return "bytes"
    return "count"


def _parse_long(header: list[str], rows: list[list[str]]) -> list[dict]:
    by_id: dict[str, dict] = {}
    needed = header.index("Metric Value") + 1 if "Metric Value" in header else len(header)
    for row in rows:
        if len(row) < needed:  # rows without the rule columns are shorter than the header
            continue
        cols = dict(zip(header, row))
        key = cols.get("ID", "")
        rec = by_id.get(key)
        if rec is None:
            rec = by_id[key] = _record(cols)
        metric, unit = cols.get("Metric Name", ""), (cols.get("Metric Unit") or "").strip()
        if metric:
            value = _normalise(_number(cols.get("Metric Value", "")), unit)
            rec["metrics"][metric] = value
            rec["units"][metric] = unit
            raw = DETAILS_LABELS.get((metric, _unit_kind(unit)))
            if raw is not None and raw not in rec["metrics"]:
                rec["metrics"][raw], rec["units"][raw] = value, unit
    return sorted(by_id.values(), key=lambda r: r["id"])


def _first(metrics: dict, *names):
    for n in names:
        v = metrics.get(n)
        if isinstance(v, float):
            return v
    return None


def _max_matching(metrics: dict, prefix: str, suffix: str):
    vals = [
        v for k, v in metrics.items() if k.startswith(prefix) and k.endswith(suffix) and isinstance(v, float)
    ]
    return max(vals) if vals else None


OCCUPANCY_LIMITERS = {
    "launch__occupancy_limit_registers": "registers",
    "launch__occupancy_limit_shared_mem": "shared memory",
    "launch__occupancy_limit_warps": "warps (block size)",
    "launch__occupancy_limit_blocks": "blocks per SM",
    "launch__occupancy_limit_barriers": "barriers",
}


def kernel_metrics(rec: dict) -> dict:
    """The fields the summary and the classifier use, from one parsed launch (None: not collected)."""
    m = rec["metrics"]
    duration_ns = _first(m, "gpu__time_duration.sum", "gpu__time_duration.avg", "gpu__time_duration")
    dram_read, dram_write = _first(m, "dram__bytes_read.sum"), _first(m, "dram__bytes_write.sum")
    dram_bytes = _first(m, "dram__bytes.sum")
    if dram_bytes is None and dram_read is not None and dram_write is not None:
        dram_bytes = dram_read + dram_write
    dram_bw = _first(m, "dram__bytes.sum.per_second")
    if dram_bw is None and dram_bytes is not None and duration_ns:
        dram_bw = dram_bytes / (duration_ns * 1e-9)
    limits = {label: m[k] for k, label in OCCUPANCY_LIMITERS.items() if isinstance(m.get(k), float)}
    limiter = min(limits, key=limits.get) if limits else None
    tensor = _max_matching(m, "sm__pipe_tensor", ".avg.pct_of_peak_sustained_active")
    if tensor is None:
        tensor = _max_matching(m, "sm__inst_executed_pipe_tensor", ".avg.pct_of_peak_sustained_active")
    smem_static = _first(m, "launch__shared_mem_per_block_static")
    smem_dynamic = _first(m, "launch__shared_mem_per_block_dynamic")
    return {
        "duration_us": duration_ns / 1e3 if duration_ns is not None else None,
        "dram_pct": _first(
            m,
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        ),
        "memory_pct": _first(m, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
        "dram_bytes": dram_bytes,
        "dram_gbps": dram_bw / 1e9 if dram_bw is not None else None,
        "sm_pct": _first(m, "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        "tensor_pct": tensor,
        "achieved_occupancy_pct": _first(m, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        "theoretical_occupancy_pct": _first(m, "sm__maximum_warps_per_active_cycle_pct"),
        "occupancy_limiter": limiter,
        "occupancy_block_limits": limits,
        "registers_per_thread": _first(m, "launch__registers_per_thread"),
        "shared_bytes_per_block": (smem_static or 0.0) + (smem_dynamic or 0.0)
        if smem_static is not None or smem_dynamic is not None
        else None,
        "shared_static_bytes": smem_static,
        "shared_dynamic_bytes": smem_dynamic,
        "block_size": _first(m, "launch__block_size"),
        "grid_size": _first(m, "launch__grid_size"),
        "waves_per_sm": _first(m, "launch__waves_per_multiprocessor"),
        "sm_count": _first(m, "device__attribute_multiprocessor_count", "launch__sm_count"),
        "l1_hit_pct": _first(m, "l1tex__t_sector_hit_rate.pct"),
        "l2_hit_pct": _first(m, "lts__t_sector_hit_rate.pct"),
    }
