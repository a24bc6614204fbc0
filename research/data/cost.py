"""Analytic eager-runtime model: the CPU proxy for the GPU runtime window, and what sizes tasks at synthesis.

Each op reports its FLOPs, bytes moved and kernel launches at the task's *real* sizes; the estimate is a
roofline per op, ``max(flops / rate, bytes / bandwidth) + launches * launch overhead``, summed over ops,
with achieved (not peak) rates of the target GPU. Eager PyTorch keeps the torch defaults: FP32 matmuls on
CUDA cores (TF32 off), cuDNN convolutions in TF32. It is a proxy: ``scripts/gpu_data.sh`` measures how far it
is from the sandbox's real eager medians and records the ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ops._core import Cost


@dataclass
class GpuProfile:
    """Achieved throughput of the target GPU for eager PyTorch (defaults: one H200, measured/derated)."""

    name: str = "NVIDIA H200"
    fp32_tflops: float = 45.0  # SGEMM on CUDA cores
    tf32_tflops: float = 250.0  # cuDNN convolutions in fp32 (TF32 allowed by default)
    half_tflops: float = 550.0  # bf16/fp16 tensor-core GEMM
    bandwidth_gbs: float = 3500.0  # achieved HBM bandwidth of simple eager kernels
    launch_us: float = 5.0  # per kernel launch in eager mode
    conv_efficiency: float = 0.5
    attn_efficiency: float = 0.5


def _rate(kind: str, dtype: str, p: GpuProfile) -> float:
    half = dtype in ("float16", "bfloat16")
    if kind == "gemm":
        tflops = p.half_tflops if half else p.fp32_tflops
    elif kind == "conv":
        tflops = (p.half_tflops if half else p.tf32_tflops) * p.conv_efficiency
    elif kind == "attn":
        tflops = (p.half_tflops if half else p.fp32_tflops) * p.attn_efficiency
    else:
        tflops = p.fp32_tflops
    return tflops * 1e12


def estimate_ms(costs: list[Cost], profile: GpuProfile) -> float:
    total = 0.0
    bw = profile.bandwidth_gbs * 1e9
    for c in costs:
        total += (
            max(c.flops / _rate(c.kind, c.dtype, profile), c.bytes / bw)
            + c.kernels * profile.launch_us * 1e-6
        )
    return total * 1e3


def peak_bytes(costs: list[Cost]) -> float:
    """A footprint estimate: the largest traffic of one op (its inputs, weights and output live at once)."""
    return max((c.bytes for c in costs), default=0.0)
