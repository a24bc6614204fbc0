"""Shared helpers of the JAX benchmarks (models, rl, toyenv): the JAX device, device ceilings measured in the
same run (copy bandwidth, bf16 matmul rate), timing, tables and XLA kernel counts. Results are written by
``benchmarks._results``."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

PEAK_BF16 = 989e12  # the H200's dense bf16 peak (FLOP/s): MFU is reported against it and the measured matmul


def jax_device_info() -> dict:
    import jax

    dev = jax.devices()[0]
    return {
        "jax_backend": jax.default_backend(),
        "jax_device": str(getattr(dev, "device_kind", dev)),
        "jax_device_count": jax.device_count(),
    }


def timeit(fn, *args, warmup: int = 1, iters: int = 5) -> float:
    """Mean seconds per call of a jax function (results blocked on)."""
    import jax

    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    t = time.perf_counter()
    for _ in range(iters):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / iters


def copy_bandwidth(nbytes: int = 1 << 30, iters: int = 10) -> float:
    """Device copy bandwidth in bytes/s, counting bytes read and written (an elementwise bf16 pass)."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((nbytes // 2,), jnp.bfloat16)
    f = jax.jit(lambda a: a + jnp.bfloat16(1))
    return 2 * nbytes / timeit(f, x, warmup=2, iters=iters)


def matmul_rate(n: int = 8192, iters: int = 10) -> float:
    """bf16 matmul FLOP/s (fp32 accumulation, bf16 output) on an n x n x n product of random data."""
    import jax
    import jax.numpy as jnp

    ka, kb = jax.random.split(jax.random.key(0))
    a = jax.random.normal(ka, (n, n), jnp.bfloat16)
    b = jax.random.normal(kb, (n, n), jnp.bfloat16)
    f = jax.jit(lambda x, y: x @ y)
    return 2 * n**3 / timeit(f, a, b, warmup=3, iters=iters)


def table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [
        [("-" if c is None else f"{c:.4g}" if isinstance(c, float) else str(c)) for c in r] for r in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def hlo_loop_stats(hlo_text: str, steps_per_iteration: int = 1) -> dict:
    """Kernel launches per decode step in an optimised XLA program's while-loop body (for diagnosis):
    fusions (each one kernel; Triton GEMMs included), custom calls (cuBLAS / cuDNN / Pallas kernels) and
    copies, divided by the decode steps one iteration runs. Whether XLA then records them into CUDA graphs
    is decided after this HLO (a pass over the runtime thunks), so it cannot be read here."""
    comps, name, lines = {}, None, []
    for line in hlo_text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if head and not line.startswith(" "):
            name, lines = head.group(1), []
        elif line.startswith("}") and name:
            comps[name] = lines
            name = None
        elif name:
            lines.append(line)
    bodies = [
        m.group(1) for ls in comps.values() for ln in ls for m in [re.search(r"body=%?([\w.\-]+)", ln)] if m
    ]

    def count(comp, seen):
        out = {"fusion": 0, "custom_call": 0, "copy": 0}
        if comp in seen or comp not in comps:
            return out
        seen.add(comp)
        for ln in comps[comp]:
            out["fusion"] += " fusion(" in ln
            out["custom_call"] += " custom-call(" in ln
            out["copy"] += " copy(" in ln or " copy-start(" in ln
            for callee in re.findall(
                r"(?:to_apply|calls|body|condition|branch_computations)=\{?%?([\w.\-]+)", ln
            ):
                if "fused" not in callee:
                    sub = count(callee, seen)
                    out = {k: out[k] + sub[k] for k in out}
        return out

    loops = [dict(body=b, **count(b, set())) for b in bodies]
    main = max(loops, key=lambda d: d["fusion"] + d["custom_call"], default=None)
    per_step = None
    if main is not None:
        per_step = {k: main[k] / steps_per_iteration for k in ("fusion", "custom_call", "copy")}
        per_step["kernels"] = per_step["fusion"] + per_step["custom_call"]
    return {"loops": loops, "per_step": per_step}


_KIND_PATTERNS = (  # kernel name -> kind, first match wins (XLA fusion names, cuBLAS/cuDNN, Pallas)
    ("attention_pallas", r"mha_forward|decode_att|attn_forward"),
    ("gemm", r"gemm|cublas|xmma|cutlass|nvjet|sm\d+_.*gemm|dot"),
    ("cudnn", r"cudnn|fmha|flash"),
    ("dynamic_update_slice", r"dynamic_update_slice|dynamic-update-slice"),
    ("reduction", r"reduce|argmax|softmax|norm"),
    ("copy/transpose", r"copy|transpose|memcpy|memset"),
    ("elementwise", r"loop_|fusion|concatenate|convert|select|add|multiply"),
)


def _kernel_kind(name: str) -> str:
    low = name.lower()
    for kind, pattern in _KIND_PATTERNS:
        if re.search(pattern, low):
            return kind
    return "other"


def trace_kernel_summary(trace_dir, steps: int, module_substr: str = "_decode_impl", top: int = 25) -> dict:
    """Per-step GPU kernel time of one profiled call from a ``jax.profiler.trace`` directory: kernel
    launches and busy time per decode step, the kernels grouped by name (instance suffixes stripped) and
    by kind. Only events of modules whose name contains ``module_substr`` count when the trace says which
    module a kernel belongs to. XLA runs kernels outside CUDA graphs while a profiler is attached, so
    this is kernel time, not the graph-launched step time."""
    import gzip

    paths = sorted(Path(trace_dir).glob("plugins/profile/*/*.trace.json.gz"))
    if not paths:
        raise FileNotFoundError(f"no *.trace.json.gz under {trace_dir}")
    with gzip.open(paths[-1], "rt") as fh:
        events = json.load(fh).get("traceEvents", [])
    procs = {
        e.get("pid"): str(e.get("args", {}).get("name", ""))
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    device_pids = {pid for pid, name in procs.items() if "GPU" in name or "/device:" in name}
    if device_pids:
        kernels = [e for e in events if e.get("ph") == "X" and e.get("pid") in device_pids and e.get("dur")]
    else:  # the CPU backend: its thunks are host events that name their HLO op (the --tiny smoke test)
        kernels = [
            e
            for e in events
            if e.get("ph") == "X"
            and "hlo_op" in e.get("args", {})
            and not re.match(r"(while|call|conditional)\b", str(e.get("name")))  # they contain the others
        ]
    if any("hlo_module" in e.get("args", {}) for e in kernels):
        kernels = [e for e in kernels if module_substr in str(e.get("args", {}).get("hlo_module", ""))]
    groups: dict[str, list] = {}
    kinds: dict[str, list] = {}
    for e in kernels:
        base = re.sub(r"([._]\d+)+$", "", str(e.get("name", "?")))
        groups.setdefault(base, [0, 0.0])
        groups[base][0] += 1
        groups[base][1] += e["dur"]
        kind = _kernel_kind(base)
        kinds.setdefault(kind, [0, 0.0])
        kinds[kind][0] += 1
        kinds[kind][1] += e["dur"]
    total_us = sum(g[1] for g in groups.values())
    span_us = (max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels)) if kernels else 0.0

    def row(name, g):
        return {
            "name": name,
            "per_step": g[0] / steps,
            "us_per_step": g[1] / steps,
            "share": g[1] / total_us if total_us else None,
        }

    ranked = sorted(groups.items(), key=lambda kv: -kv[1][1])
    return {
        "file": paths[-1].name,
        "steps": steps,
        "device_processes": sorted(procs[p] for p in device_pids),
        "kernels_per_step": len(kernels) / steps,
        "kernel_ms_per_step": total_us / steps / 1e3,
        "span_ms_per_step": span_us / steps / 1e3,
        "by_kind": {k: row(k, g) for k, g in sorted(kinds.items(), key=lambda kv: -kv[1][1])},
        "top": [row(n, g) for n, g in ranked[:top]],
    }
