"""Roofline counts against hand-computed FLOPs and bytes (meta tensors: no memory, any size)."""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn as nn

from kernels_env.tools._roofline import count_reference, distance, floor, nominal_ceilings


def _ref(model_cls, inputs, init=()):
    return types.SimpleNamespace(Model=model_cls, get_inputs=inputs, get_init_inputs=lambda: list(init))


class MatmulRelu(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)


def test_matmul_flops_and_compulsory_bytes():
    M, K, N = 4096, 2048, 1024
    c = count_reference(_ref(MatmulRelu, lambda: [torch.rand(M, K), torch.rand(K, N)]))
    assert c["matmul_flops"] == 2 * M * K * N
    assert c["other_flops"] == M * N  # relu: one per output element
    assert c["compulsory_bytes"] == 4 * (M * K + K * N + M * N)
    assert c["unfused_bytes"] == 4 * (M * K + K * N + M * N) + 4 * 2 * M * N  # mm, then relu reads + writes
    assert c["matmul_dtype"] == "fp32"


class Elementwise(nn.Module):
    def forward(self, x, y):
        z = x.view(-1) * 2.0  # the view moves no data
        return (z + y.view(-1)).sigmoid()


def test_elementwise_counts_views_as_free():
    n = 1 << 24
    c = count_reference(_ref(Elementwise, lambda: [torch.rand(4, n // 4), torch.rand(n)]))
    assert c["matmul_flops"] == 0 and c["other_flops"] == 3 * n
    assert c["compulsory_bytes"] == 4 * 3 * n
    assert c["unfused_bytes"] == 4 * (2 * n + 3 * n + 2 * n)  # mul r+w, add 2r+w, sigmoid r+w


class Conv(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, bias=False)

    def forward(self, x):
        return self.conv(x)


def test_conv_flops_and_parameter_bytes():
    B, C, H, W, Co, k = 8, 64, 56, 56, 128, 3
    c = count_reference(_ref(Conv, lambda: [torch.rand(B, C, H, W)], init=(C, Co, k)))
    Ho, Wo = H - k + 1, W - k + 1
    assert c["matmul_flops"] == 2 * B * Co * Ho * Wo * C * k * k
    assert c["param_bytes"] == 4 * Co * C * k * k
    assert c["compulsory_bytes"] == 4 * (B * C * H * W + Co * C * k * k + B * Co * Ho * Wo)


def test_floor_and_distance():
    counts = {
        "matmul_flops": 2 * 8192**3,
        "other_flops": 0,
        "compulsory_bytes": 3 * 8192 * 8192 * 2,
        "matmul_dtype": "bf16",
    }
    ceil = {"dram_gbps": 4000.0, "tflops": {"fp32": 50.0, "tf32": 400.0, "bf16": 800.0}}
    f = floor(counts, ceil)
    assert f["bound"] == "compute" and f["floor_us"] == pytest.approx(2 * 8192**3 / 800e12 * 1e6)
    assert distance(f["floor_us"], 2 * f["floor_us"]) == {
        "measured_us": 2 * f["floor_us"],
        "x_above_floor": 2.0,
        "pct_of_roofline": 50.0,
    }
    mem = floor({**counts, "matmul_flops": 0}, ceil)
    assert mem["bound"] == "memory" and mem["floor_us"] == pytest.approx(3 * 8192 * 8192 * 2 / 4000e9 * 1e6)
    fp32 = floor({**counts, "matmul_dtype": "fp32"}, ceil)
    assert fp32["floor_us_if_tf32"] < fp32["floor_us"]
    assert nominal_ceilings("NVIDIA H200")["dram_gbps"] == 4800 and nominal_ceilings("Some GPU") is None
