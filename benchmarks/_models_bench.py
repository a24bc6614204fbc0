"""Shared helpers of the models benchmarks (decode_throughput.py, train_step.py): environment record,
device ceilings measured in the same run (copy bandwidth, bf16 matmul rate), timing, JSON output."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import platform
import subprocess
import time
from pathlib import Path

PACKAGES = (
    "jax",
    "jaxlib",
    "jax-cuda13-plugin",
    "jax-cuda13-pjrt",
    "flax",
    "optax",
    "orbax-checkpoint",
    "torch",
    "transformers",
    "numpy",
    "nvidia-cudnn-cu13",
)


def env_info() -> dict:
    """GPU name, driver, CUDA, package versions and date (never raises)."""
    info: dict = {
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "versions": {},
    }
    for pkg in PACKAGES:
        try:
            info["versions"][pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            info["versions"][pkg] = None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        if out.returncode == 0 and out.stdout.strip():
            name, driver, mem = (s.strip() for s in out.stdout.strip().splitlines()[0].split(","))
            info.update(gpu=name, driver=driver, gpu_memory=mem)
        head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
        if "CUDA Version:" in head:
            info["cuda_driver_api"] = head.split("CUDA Version:")[1].split()[0]
    except (OSError, subprocess.TimeoutExpired, ValueError):
        info.setdefault("gpu", None)
    return info


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


def write_json(path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)  # atomic: a killed run never leaves half a file


def read_json(path) -> dict | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [
        [("-" if c is None else f"{c:.4g}" if isinstance(c, float) else str(c)) for c in r] for r in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def hlo_loop_stats(dump_dir, module: str = "_decode_impl") -> list[dict]:
    """Kernel counts of a dumped, optimised XLA module's while-loop body (best effort, for diagnosis):
    fusions, custom calls (cuBLAS / cuDNN), copies, and calls into command buffers (CUDA graphs)."""
    import re

    stats = []
    for path in sorted(Path(dump_dir).glob(f"*{module}*after_optimizations.txt")):
        text = path.read_text()
        comps, name, lines = {}, None, []
        for line in text.splitlines():
            head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
            if head and not line.startswith(" "):
                name, lines = head.group(1), []
            elif line.startswith("}") and name:
                comps[name] = lines
                name = None
            elif name:
                lines.append(line)
        bodies = [
            m.group(1)
            for ls in comps.values()
            for ln in ls
            for m in [re.search(r"body=%?([\w.\-]+)", ln)]
            if m
        ]

        def count(comp, seen, comps=comps):
            out = {"fusion": 0, "custom_call": 0, "copy": 0, "command_buffer": 0}
            if comp in seen or comp not in comps:
                return out
            seen.add(comp)
            for ln in comps[comp]:
                out["fusion"] += " fusion(" in ln
                out["custom_call"] += " custom-call(" in ln
                out["copy"] += " copy(" in ln or " copy-start(" in ln
                out["command_buffer"] += "command_buffer" in ln
                for callee in re.findall(r"(?:to_apply|calls)=%?([\w.\-]+)", ln):
                    if "fused" not in callee:
                        sub = count(callee, seen, comps)
                        out = {k: out[k] + sub[k] for k in out}
            return out

        stats.append({"file": path.name, "while_bodies": [dict(body=b, **count(b, set())) for b in bodies]})
    return stats
