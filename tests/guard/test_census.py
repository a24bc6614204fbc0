"""Kernel census: classification of device activity and the per-policy verdicts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernels_env.guard import _checks, census_violations, classify_kernel
from kernels_env.guard._census import Census, KernelLaunch, census_from_profiler
from kernels_env.rules.operators import (
    ALLOC_INIT,
    BLAS,
    CUPY_BUILTIN,
    CUSTOM,
    DNN,
    INDUCTOR,
    MEMCPY_D2D,
    MEMCPY_D2H,
    MEMCPY_H2D,
    TORCH_KERNEL,
)  # fmt: skip
from kernels_env.rules.policies import get_policy


@pytest.mark.parametrize(
    "name,launcher,category",
    [
        ("relu_kernel(float const*, float*, long long)", "", CUSTOM),
        ("my_gemm_tiled", "", CUSTOM),  # a custom kernel may call itself gemm
        # CUTLASS templates instantiated by the solution are its code; cuBLAS's own instantiations are not
        ("void cutlass::Kernel2<cutlass::gemm::kernel::GemmUniversal<float>>(Params)", "", CUSTOM),
        ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)", "", BLAS),
        ("matmul_kernel", "", CUSTOM),  # a Triton kernel: the solution's
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "", BLAS),
        ("nvjet_tst_128x64_64x4_1x2_h_bz_NNT", "", BLAS),
        ("ampere_sgemm_128x64_nn", "", BLAS),
        ("void gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4>", "", BLAS),
        ("cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4", "", BLAS),
        ("sm90_xmma_fprop_implicit_gemm_f32f32", "", DNN),
        ("void cudnn::engines_precompiled::nchwToNhwcKernel<float>", "", DNN),
        ("cupy_maximum__float32_float32_float32", "", CUPY_BUILTIN),
        ("triton_poi_fused_relu_0", "", INDUCTOR),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "", ALLOC_INIT),
        ("void at::native::reduce_kernel<512, 1>", "", TORCH_KERNEL),
        ("anything", "aten::zeros", ALLOC_INIT),
        ("anything", "aten::mm", BLAS),
        ("anything", "aten::convolution", DNN),
        ("anything", "aten::relu", TORCH_KERNEL),
        ("my_kernel", "myext::fused", CUSTOM),  # launched inside the solution's own custom op
        ("Memcpy DtoH (Device -> Pageable)", "", MEMCPY_D2H),
        ("Memcpy HtoD (Pageable -> Device)", "", MEMCPY_H2D),
        ("Memcpy DtoD (Device -> Device)", "", MEMCPY_D2D),
        ("Memset (Device)", "", ALLOC_INIT),
    ],
)
def test_classify_kernel(name, launcher, category):
    assert classify_kernel(name, launcher) == category


def _census(*launches):
    return Census("cuda-profiler", [KernelLaunch(n, c, d) for n, c, d in launches])


def _checks_of(census, policy):
    return [v.check for v in census_violations(census, get_policy(policy))]


def test_strict_needs_a_custom_kernel_and_no_library():
    assert _checks_of(_census(("relu", CUSTOM, 5.0), ("fill", ALLOC_INIT, 1.0)), "strict") == []
    assert _checks_of(_census(("fill", ALLOC_INIT, 1.0)), "strict") == [_checks.NO_CUSTOM_KERNEL]
    assert _checks_of(_census(("relu", CUSTOM, 5.0), ("gemm", BLAS, 50.0)), "strict") == [
        _checks.LIBRARY_KERNEL
    ]
    assert _checks_of(_census(("relu", CUSTOM, 5.0), ("cupy_max", CUPY_BUILTIN, 5.0)), "strict") == [
        _checks.LIBRARY_KERNEL
    ]
    assert _checks.HOST_ROUNDTRIP in _checks_of(
        _census(("t", CUSTOM, 1.0), ("Memcpy DtoH", MEMCPY_D2H, 9.0)), "strict"
    )


def test_cuda_agent_counts_library_gemm_as_work():
    assert _checks_of(_census(("gemm", BLAS, 50.0)), "cuda_agent") == []
    assert _checks_of(_census(("gemm", BLAS, 50.0), ("elementwise", TORCH_KERNEL, 5.0)), "cuda_agent") == [
        _checks.LIBRARY_KERNEL
    ]


def test_kernelbench_decoy_share():
    decoy = _census(("gemm", BLAS, 300.0), ("touch", CUSTOM, 2.0))
    assert _checks_of(decoy, "kernelbench") == [_checks.LOW_CUSTOM_WORK]
    epilogue = _census(("gemm", BLAS, 300.0), ("bias_relu", CUSTOM, 30.0))
    assert _checks_of(epilogue, "kernelbench") == []
    assert _checks_of(_census(("gemm", BLAS, 300.0)), "kernelbench") == [_checks.NO_CUSTOM_KERNEL]


def _evt(name, children=(), kernels=(), device=False, start=0.0, dur=1.0):
    e = SimpleNamespace(
        name=name,
        cpu_children=list(children),
        cpu_parent=None,
        kernels=[SimpleNamespace(name=k) for k in kernels],
        device_type=SimpleNamespace(name="CUDA" if device else "CPU"),
        time_range=SimpleNamespace(start=start, elapsed_us=lambda d=dur: d),
    )
    for c in e.cpu_children:
        c.cpu_parent = e
    return e


def test_census_from_profiler_attributes_kernels_to_the_outer_operator():
    fill = _evt("aten::fill_", kernels=["fill_kernel"])
    zeros = _evt("aten::zeros", children=[_evt("aten::empty"), fill])
    copy_in_addmm = _evt("aten::copy_", kernels=["copy_kernel"])
    addmm = _evt("aten::addmm", children=[copy_in_addmm], kernels=["gemm_kernel_x"])
    internal = _evt("guard::internal::abc", children=[_evt("aten::clone", kernels=["clone_kernel"])])
    cpu = [zeros, fill, addmm, copy_in_addmm, internal]
    device = [
        _evt("fill_kernel", device=True, start=1),
        _evt("copy_kernel", device=True, start=2),
        _evt("gemm_kernel_x", device=True, start=3, dur=40.0),
        _evt("my_relu", device=True, start=4, dur=4.0),
        _evt("clone_kernel", device=True, start=5),
    ]
    census = census_from_profiler(cpu + device, exclude_marker="guard::internal::abc")
    cats = {k.name: (k.category, k.launcher) for k in census.launches}
    assert cats == {
        "fill_kernel": (ALLOC_INIT, "aten::zeros"),
        "copy_kernel": (BLAS, "aten::addmm"),  # internal copy of an allowed GEMM counts as the GEMM's
        "gemm_kernel_x": (BLAS, "aten::addmm"),
        "my_relu": (CUSTOM, ""),
    }
    assert census.share({CUSTOM}) == pytest.approx(4.0 / 45.0)  # allocation fills are not work
