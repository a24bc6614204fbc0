"""Roofline floor of a task: the FLOPs that must be done and the bytes that must move, from the reference's
own ops and shapes, against the device's ceilings; and a candidate's distance from that floor.

The reference's forward is walked op by op with a ``TorchDispatchMode`` on meta tensors (no memory, no
device, any input size): FLOPs of matmul/conv/attention come from ``torch.utils.flop_counter``'s formulas;
pointwise/reduction ops count one FLOP per output element. Bytes:
``compulsory`` = forward inputs + parameters/buffers the ops read + outputs (what a single fused kernel must
move: the floor); ``unfused`` = every non-view op reading its inputs and writing its output (eager's traffic).
Algebraic shortcuts (e.g. matmul then sum) can beat this floor legitimately; it is an estimate, not a bound.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

NOMINAL_CEILINGS = {  # dense peaks from vendor spec sheets (SXM parts); used when nothing was measured
    "H200": {"dram_gbps": 4800, "tflops": {"fp32": 67, "tf32": 494, "bf16": 989, "fp16": 989, "fp64": 67}},
    "H100": {"dram_gbps": 3350, "tflops": {"fp32": 67, "tf32": 494, "bf16": 989, "fp16": 989, "fp64": 67}},
    "H20": {"dram_gbps": 4000, "tflops": {"fp32": 44, "tf32": 74, "bf16": 148, "fp16": 148, "fp64": 1}},
    "A100": {
        "dram_gbps": 2039,
        "tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "fp64": 19.5},
    },
    "L40S": {"dram_gbps": 864, "tflops": {"fp32": 91.6, "tf32": 183, "bf16": 362, "fp16": 362, "fp64": 1.4}},
}
_DTYPE_KEY = {
    "torch.float32": "fp32",
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.float64": "fp64",
}


def count_reference(ref_mod, device: str = "meta") -> dict:
    """Walk ``Model(*get_init_inputs())(*get_inputs())`` and count FLOPs and bytes per op."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    from ..guard._outputs import tensors  # imports torch, like the lines above

    with torch.device(device):
        torch.manual_seed(0)
        model = ref_mod.Model(*ref_mod.get_init_inputs())
        inputs = list(ref_mod.get_inputs())
    if device == "meta":  # inputs built by factory functions already are meta; move any that are not
        inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
        model = model.to("meta")
    params = {_sid(t): t for t in [*model.parameters(), *model.buffers()]}
    ops: dict[str, dict] = {}
    seen_params: set = set()
    state = {"unfused_bytes": 0, "matmul_flops": 0, "other_flops": 0, "matmul_dtype": None}

    class Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if _is_view(func):
                return out
            tin = tensors((args, kwargs))
            tout = tensors(out)
            for t in tin:
                if _sid(t) in params:
                    seen_params.add(_sid(t))
            nbytes = sum(_nbytes(t) for t in tin) + sum(_nbytes(t) for t in tout)
            packet = func._overloadpacket
            if packet in flop_registry:
                flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
                state["matmul_flops"] += flops
                if tin and state["matmul_dtype"] is None:
                    state["matmul_dtype"] = _DTYPE_KEY.get(str(tin[0].dtype), str(tin[0].dtype))
                kind = "matmul"
            else:
                flops = sum(t.numel() for t in tout if t.is_floating_point())
                state["other_flops"] += flops
                kind = "other"
            state["unfused_bytes"] += nbytes
            rec = ops.setdefault(
                str(packet), {"op": str(packet), "kind": kind, "calls": 0, "flops": 0, "bytes": 0}
            )
            rec["calls"] += 1
            rec["flops"] += flops
            rec["bytes"] += nbytes
            return out

    with torch.no_grad(), Counter():
        out = model(*inputs)
    in_bytes = sum(_nbytes(t) for t in tensors(inputs))
    param_bytes = sum(_nbytes(params[s]) for s in seen_params)
    out_bytes = sum(_nbytes(t) for t in tensors(out))
    return {
        "matmul_flops": state["matmul_flops"],
        "other_flops": state["other_flops"],
        "matmul_dtype": state["matmul_dtype"],
        "compulsory_bytes": in_bytes + param_bytes + out_bytes,
        "input_bytes": in_bytes,
        "param_bytes": param_bytes,
        "output_bytes": out_bytes,
        "unfused_bytes": state["unfused_bytes"],
        "ops": sorted(ops.values(), key=lambda r: -r["bytes"]),
    }


def _sid(t):
    try:
        return (t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape))
    except Exception:  # noqa: BLE001 - tensors without storage (subclasses)
        return id(t)


def _nbytes(t) -> int:
    n = t.numel() * t.element_size()
    try:
        return min(n, t.untyped_storage().nbytes())  # broadcast (stride-0) views read their storage once
    except Exception:  # noqa: BLE001
        return n


def _is_view(func) -> bool:
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def nominal_ceilings(device_name: str) -> dict | None:
    for key, c in NOMINAL_CEILINGS.items():
        if key.lower() in device_name.lower().replace("-", " ").split() or key.lower() in device_name.lower():
            return {
                "source": f"nominal ({key} spec sheet)",
                "dram_gbps": c["dram_gbps"],
                "tflops": dict(c["tflops"]),
            }
    return None


def measure_ceilings(cache_dir: str | None = None, force: bool = False) -> dict:
    """Measured on this GPU (once; cached by device, driver and torch): device-to-device copy bandwidth
    (read + write bytes) and dense matmul throughput per dtype (fp32 with TF32 off, tf32, bf16, fp16)."""
    import torch

    name = torch.cuda.get_device_name()
    key = _ceilings_key(name)
    path = _ceilings_path(cache_dir)
    cache = _read_ceilings(path)
    if key in cache and not force:
        return cache[key]
    result = {"source": "measured", "device": name, "dram_gbps": _copy_gbps(torch), "tflops": {}}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for label, dtype, tf32 in (
            ("fp32", torch.float32, False),
            ("tf32", torch.float32, True),
            ("bf16", torch.bfloat16, False),
            ("fp16", torch.float16, False),
        ):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            result["tflops"][label] = _matmul_tflops(torch, dtype)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    result["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
    cache[key] = result
    try:  # atomic: GPU workers and tool processes may measure at the same time
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(cache, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
    return result


def _ceilings_key(device_name: str) -> str:
    import torch

    return f"{device_name}|{torch.version.cuda}|{torch.__version__}".replace("/", "_")


def _ceilings_path(cache_dir: str | None) -> Path:
    return Path(os.path.expanduser(cache_dir or "~/.cache/cuda_agent_jax")) / "ceilings.json"


def _read_ceilings(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        return {}


def cached_ceilings(cache_dir: str | None, device_name: str) -> dict | None:
    """Ceilings measured earlier on ``device_name`` (by a GPU process with the same torch), if cached: what a
    process without the GPU (the compile worker) uses."""
    return _read_ceilings(_ceilings_path(cache_dir)).get(_ceilings_key(device_name))


def _time_ms(torch, fn, iters: int) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def _copy_gbps(torch) -> float:
    from ..judge.timing.timer import copy_seconds  # imports torch (only a GPU measurement gets here)

    n = 512 * 1024 * 1024
    s = statistics.median(copy_seconds("cuda", n, iters=10))  # what a good kernel can expect to reach
    return round(2 * n / s / 1e9, 1)


def _matmul_tflops(torch, dtype) -> float:
    n = 8192 if dtype != torch.float32 else 4096
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    ms = _time_ms(torch, lambda: a @ b, 10)
    return round(2 * n**3 / (ms * 1e-3) / 1e12, 1)


def floor(counts: dict, ceilings: dict) -> dict:
    """Floor time of the task (us) and what bounds it."""
    dtype = counts.get("matmul_dtype") or "fp32"
    tf = ceilings["tflops"]
    matmul_peak = tf.get(dtype) or tf.get("fp32")
    t_matmul = counts["matmul_flops"] / (matmul_peak * 1e12) * 1e6 if counts["matmul_flops"] else 0.0
    t_other = counts["other_flops"] / (tf["fp32"] * 1e12) * 1e6
    t_mem = counts["compulsory_bytes"] / (ceilings["dram_gbps"] * 1e9) * 1e6
    t_compute = t_matmul + t_other
    out = {
        "floor_us": max(t_compute, t_mem),
        "memory_floor_us": t_mem,
        "compute_floor_us": t_compute,
        "bound": "memory" if t_mem >= t_compute else "compute",
        "matmul_peak_tflops": matmul_peak,
        "matmul_dtype": dtype,
        "arithmetic_intensity": (counts["matmul_flops"] + counts["other_flops"])
        / max(counts["compulsory_bytes"], 1),
    }
    if dtype == "fp32" and counts["matmul_flops"] and tf.get("tf32"):
        t_tf32 = counts["matmul_flops"] / (tf["tf32"] * 1e12) * 1e6 + t_other
        out["floor_us_if_tf32"] = max(t_tf32, t_mem)
    return out


def distance(floor_us: float, measured_us: float | None) -> dict | None:
    if not measured_us or measured_us <= 0 or floor_us <= 0:
        return None
    return {
        "measured_us": measured_us,
        "x_above_floor": measured_us / floor_us,
        "pct_of_roofline": 100.0 * floor_us / measured_us,
    }
