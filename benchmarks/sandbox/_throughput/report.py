"""The report: the machine and versions, the headline against the targets, the markdown table and the
plot, from the steps' part files or from a recorded results file."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from kernels_env.host.environment import nvidia_smi

from . import ROOT
from .common import TARGETS


def _run(cmd: list[str]) -> str | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT)
        return proc.stdout.strip() if proc.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict:
    from importlib import metadata

    env: dict = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "git_commit": _run(["git", "rev-parse", "HEAD"]),
        "git_dirty": bool(_run(["git", "status", "--porcelain"])),
    }
    for dist in ("torch", "cupy-cuda13x", "cupy-cuda12x", "triton", "jax", "numpy", "nvidia-cuda-nvrtc"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            env[f"{dist}_version"] = metadata.version(dist)
    try:
        import torch

        env["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            env.update(
                gpu=torch.cuda.get_device_name(0),
                gpu_count=torch.cuda.device_count(),
                capability=".".join(map(str, torch.cuda.get_device_capability(0))),
                sm_count=props.multi_processor_count,
                l2_bytes=getattr(props, "L2_cache_size", None),
                memory_bytes=props.total_memory,
            )
    except Exception as exc:
        env["torch_error"] = repr(exc)
    smi = nvidia_smi("name", "driver_version", "clocks.max.sm")
    if smi:
        env["nvidia_smi"] = ", ".join(smi.values())
        env["driver"] = smi["driver_version"]
    try:
        from kernels_env.fastpath import toolchain

        env["nvcc"] = toolchain.nvcc_release()
        env["nvrtc"] = toolchain.nvrtc_version()
    except Exception as exc:
        env["toolchain_error"] = repr(exc)
    return env


def headline(results: dict) -> dict:
    comp = results.get("compile", {}).get("summary", {})
    e2e = results.get("e2e", {}).get("summary", {})
    spread = results.get("spread", {}).get("summary", {})
    speedup = comp.get("speedup_same_concurrency")
    rate = e2e.get("candidates_per_hour")
    # The target is about the judge's timer: the spread of candidate timings inside sandbox verdicts.
    spreads = [s for s in (e2e.get("sandbox_max_spread"),) if s is not None]
    return {
        "compile_fastpath_median_s": comp.get("fastpath_solo", {}).get("median"),
        "compile_fastpath_concurrent_median_s": comp.get("fastpath_concurrent", {}).get("median"),
        "compile_load_inline_median_s": comp.get("load_inline_concurrent", {}).get("median"),
        "compile_speedup": speedup,
        "compile_target_met": speedup >= TARGETS["compile_speedup"] if speedup else None,
        "candidates_per_hour_per_gpu": rate,
        "throughput_target_met": rate >= TARGETS["candidates_per_hour"] if rate else None,
        "seconds_per_candidate_median": e2e.get("seconds_per_candidate", {}).get("median"),
        "spread_max_own_timer": spread.get("max_spread"),
        "spread_max_sandbox": e2e.get("sandbox_max_spread"),
        "spread_target_met": max(spreads) < TARGETS["spread"] if spreads else None,
    }


def _fmt(v, kind: str = "") -> str:
    if v is None:
        return "n/a"
    if kind == "s":
        return f"{v:.3f} s" if v < 10 else f"{v:.1f} s"
    if kind == "%":
        return f"{100 * v:.2f}%"
    if kind == "x":
        return f"{v:.1f}x"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.0f}"
    return str(v)


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown(results: dict) -> str:
    h = results.get("headline") or headline(results)
    env = results.get("environment", {})
    comp = results.get("compile", {})
    conc = comp.get("concurrency")
    summ = comp.get("summary", {})
    n_li = len(summ.get("paired_tasks", []))
    title = (
        f"Sandbox throughput on {env.get('gpu', '?')} (driver {env.get('driver', '?')}, CUDA "
        f"{env.get('torch_cuda', '?')}, nvcc {env.get('nvcc', '?')}, torch {env.get('torch_version', '?')}), "
        f"{env.get('date', '?')}"
    )
    lines = [
        title,
        "",
        _row("metric", "value", "target", "met"),
        _row("---", "---", "---", "---"),
        _row("compile, fast path (median, 1 process)", _fmt(h["compile_fastpath_median_s"], "s"), "", ""),
        _row(
            f"compile, fast path (median, {conc} at once)",
            _fmt(h["compile_fastpath_concurrent_median_s"], "s"),
            "",
            "",
        ),
        _row(
            f"compile, load_inline (median, {conc} at once, {n_li} tasks)",
            _fmt(h["compile_load_inline_median_s"], "s"),
            "",
            "",
        ),
        _row(
            "compile, load_inline fastest form (use_pch, wrappers in cpp_sources; median, 1 at a time)",
            _fmt(summ.get("load_inline_fast_solo", {}).get("median"), "s"),
            "",
            "",
        ),
        _row(
            f"compile, load_inline fastest form (median, {conc} at once)",
            _fmt(summ.get("load_inline_fast_concurrent", {}).get("median"), "s"),
            "",
            "",
        ),
        _row(
            "compile speedup (fastest load_inline / fast path, same tasks and concurrency)",
            _fmt(summ.get("speedup_vs_fastest_load_inline"), "x"),
            "",
            "",
        ),
        _row(
            "compile speedup (load_inline / fast path, same tasks and concurrency)",
            _fmt(h["compile_speedup"], "x"),
            ">= 20x",
            _fmt(h["compile_target_met"]),
        ),
        _row(
            "end-to-end seconds per candidate (median)", _fmt(h["seconds_per_candidate_median"], "s"), "", ""
        ),
        _row(
            "candidates / hour / GPU (warm baselines)",
            _fmt(h["candidates_per_hour_per_gpu"]),
            ">= 1,000",
            _fmt(h["throughput_target_met"]),
        ),
        _row(
            f"spread IQR/median, kernels > 100 us, max (timer alone; "
            f"{results.get('spread', {}).get('summary', {}).get('distinct_kernels', '?')} distinct kernels)",
            _fmt(h["spread_max_own_timer"], "%"),
            "< 2%",
            "",
        ),
        _row(
            "spread IQR/median, kernels > 100 us, max (sandbox)",
            _fmt(h["spread_max_sandbox"], "%"),
            "< 2%",
            _fmt(h["spread_target_met"]),
        ),
        "",
        _row(
            "task",
            "fast path (s)",
            f"fast path, {conc} at once (s)",
            f"load_inline, {conc} at once (s)",
            "ratio",
            "correct (fp / li)",
            "kernel median (ms)",
            "spread",
            "vs eager",
        ),
        _row(*["---"] * 9),
    ]
    spread_tasks = results.get("spread", {}).get("tasks", {})
    for row in comp.get("summary", {}).get("per_task", []):
        fp, fpc, li = row.get("fastpath_solo_s"), row.get("fastpath_concurrent_s"), row.get("load_inline_s")
        sp = spread_tasks.get(row["task"], {})
        cand = sp.get("candidate_ms", {})
        lines.append(
            _row(
                row["task"],
                _fmt(fp, "s"),
                _fmt(fpc, "s"),
                _fmt(li, "s"),
                _fmt(li / fpc if li and fpc else None, "x"),
                f"{_fmt(row.get('fastpath_solo_correct'))} / {_fmt(row.get('load_inline_correct'))}",
                f"{cand['median']:.4f}" if cand.get("median") else "n/a",
                _fmt(cand.get("spread"), "%"),
                _fmt(sp.get("speedup_vs_eager"), "x"),
            )
        )
    notes = [
        f"- {row['task']} ({key.removesuffix('_note')}): {row[key].strip().splitlines()[-1][:200]}"
        for row in comp.get("summary", {}).get("per_task", [])
        for key in row
        if key.endswith("_note") and row[key].strip()
    ]
    if notes:
        lines += ["", "Not measured or failed:", *notes]
    e2e = results.get("e2e", {})
    if not e2e.get("available", False):
        lines += ["", f"End-to-end: sandbox client not available ({e2e.get('error', 'not run')})."]
    elif e2e.get("summary"):
        summary = e2e["summary"]
        lines += [
            "",
            f"End-to-end: {summary.get('candidates')} candidates, statuses {summary.get('statuses')}; tasks "
            f"{', '.join(e2e.get('tasks', []))}; baselines {e2e.get('baselines')}.",
        ]
    return "\n".join(lines) + "\n"


def plot(results: dict, path: str) -> None:
    """Per-task compile time of both paths (log scale) and, when measured, the end-to-end latency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results.get("compile", {}).get("summary", {}).get("per_task", [])
    tasks = [r["task"] for r in rows]
    fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(tasks) + 4), 4.5))
    width = 0.27
    series = [
        ("fast path, 1 process", "fastpath_solo_s"),
        ("fast path, concurrent", "fastpath_concurrent_s"),
        ("load_inline, concurrent", "load_inline_s"),
    ]
    for k, (label, key) in enumerate(series):
        xs = [i + (k - 1) * width for i in range(len(tasks))]
        ax.bar(xs, [r.get(key) or 0 for r in rows], width, label=label)
    ax.set_yscale("log")
    ax.set_ylabel("compile time (s, log scale)")
    ax.set_xticks(range(len(tasks)), tasks, rotation=45, ha="right")
    env = results.get("environment", {})
    ratio = results.get("headline", {}).get("compile_speedup")
    title = f"Build time per solution, {env.get('gpu', '?')}"
    ax.set_title(title + (f"\nmedian load_inline / fast path = {ratio:.0f}x" if ratio else ""), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def step_report(args) -> dict:
    if args.from_file:
        results = json.loads(Path(args.from_file).read_text())
    else:
        results = {"benchmark": "sandbox_throughput", "targets": TARGETS}
        for part in ("compile", "spread", "e2e"):
            path = Path(args.parts) / f"{part}.json"
            results[part] = (
                json.loads(path.read_text()) if path.exists() else {"error": "step did not finish"}
            )
        results["environment"] = environment()
    results["headline"] = headline(results)
    results["markdown"] = markdown(results)
    return results
