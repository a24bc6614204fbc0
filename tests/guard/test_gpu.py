"""GPU-only checks of the guard's CUDA side (``gpu`` marker: skipped without a device)."""

from __future__ import annotations

import pytest
import torch

from kernels_env.guard import (
    GuardViolation,
    TimingAudit,
    _checks,
    poison_free_cuda_memory,
    poisoned_count,
    policy_guard,
)

pytestmark = pytest.mark.gpu


def test_freed_reference_output_is_reused_unless_poisoned():
    x = torch.rand(1 << 20, device="cuda")
    ref = torch.relu(x)
    expected = ref.clone()
    del ref
    stolen = torch.empty_like(x)  # the caching allocator hands back the freed block: the attack is real
    assert torch.equal(stolen, expected)
    del stolen
    ref = torch.relu(x)
    del ref
    assert poison_free_cuda_memory() >= x.numel() * 4
    fresh = torch.empty_like(x)
    assert poisoned_count(fresh)[0] == fresh.numel()


def test_guard_poisons_empty_on_cuda():
    with torch.no_grad(), policy_guard("strict", census=False, device="cuda") as g:
        out = g(lambda: torch.empty(1000, device="cuda"))
    assert poisoned_count(out)[0] == 1000


def test_census_classifies_real_kernels():
    import cupy as cp

    from kernels_env.guard._census import census_from_profiler
    from kernels_env.guard._guard import _Profiler
    from kernels_env.rules.operators import ALLOC_INIT, BLAS, CUSTOM, MEMCPY_D2H

    kernel = cp.RawKernel(
        r'extern "C" __global__ void my_custom_kernel(float* y) { y[threadIdx.x] = 1.f; }', "my_custom_kernel"
    )
    a = torch.rand(256, 256, device="cuda")
    torch.cuda.synchronize()
    prof = _Profiler(cuda=True)
    with prof:
        y = torch.zeros(32, device="cuda")
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernel((1,), (32,), (y.data_ptr(),))
        torch.mm(a, a)
        y.cpu()
    census = census_from_profiler(prof.events())
    cats = {k.category for k in census.launches}
    print(census.to_dict())
    assert {ALLOC_INIT, CUSTOM, BLAS, MEMCPY_D2H} <= cats, census.to_dict()
    assert any(k.name.startswith("my_custom_kernel") and k.category == CUSTOM for k in census.launches)


def test_stream_race_is_detected():
    import cupy as cp

    spin_src = r"""
extern "C" __global__ void spin(long long c) { long long s = clock64(); while (clock64() - s < c) {} }
"""
    spin = cp.RawKernel(spin_src, "spin")
    side = torch.cuda.Stream()

    def candidate():
        y = torch.zeros(1 << 16, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), cp.cuda.ExternalStream(side.cuda_stream):
            spin((1,), (1,), (cp.int64(100_000_000),))
            y.fill_(1.0)
        return y

    with (
        pytest.raises(GuardViolation) as info,
        torch.no_grad(),
        policy_guard("strict", census=False, device="cuda") as g,
    ):
        g(candidate)
    assert info.value.check == _checks.STREAM_RACE


def test_ignored_launch_error_is_reported():
    import ctypes

    from kernels_env.fastpath import cuda_library
    from kernels_env.guard._cuda import clear_last_errors, launch_error_violations

    src = r"""
#include <cuda_runtime.h>
__global__ void k(float* y) { y[threadIdx.x] = 1.f; }
extern "C" void bad_launch(float* y, void* s) { k<<<1, 4096, 0, (cudaStream_t)s>>>(y); }
"""
    # Built by the fast path, called through a raw handle (the fast path's own wrapper would raise the error).
    lib = ctypes.CDLL(cuda_library({"bad.cu": src}, name="bad_launch_test").path)
    lib.bad_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    y = torch.zeros(8, device="cuda")
    clear_last_errors()
    lib.bad_launch(y.data_ptr(), torch.cuda.current_stream().cuda_stream)
    found = launch_error_violations()
    assert found and found[0].check == _checks.LAUNCH_ERROR, found
    assert launch_error_violations() == []  # reading the error cleared it


def test_timing_audit_sees_torch_kernels_in_unguarded_calls():
    x = torch.rand(1 << 16, device="cuda")
    with torch.no_grad(), TimingAudit("strict", device="cuda") as audit:
        torch.relu(x)
    checks = [v.check for v in audit.violations]
    assert _checks.FORBIDDEN_OP in checks and _checks.NO_CUSTOM_KERNEL in checks, audit.violations


def test_record_stream_on_a_side_stream_is_allowed():
    """A side stream reads an input; ``record_stream`` keeps the allocator from reusing the block early. The
    streams are joined before forward returns: nothing here is a mutation or a race."""
    x = torch.rand(1 << 16, device="cuda")
    side = torch.cuda.Stream()

    def forward():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            x.record_stream(side)
            y = torch.relu(x)
        torch.cuda.current_stream().wait_stream(side)
        return y

    with torch.no_grad(), policy_guard("kernelbench", inputs=[x], census=False, device="cuda") as g:
        y = g(forward)
    assert torch.equal(y, torch.relu(x))


def test_torch_ops_report_their_share_of_device_time():
    import cupy as cp

    kernel = cp.RawKernel(
        r'extern "C" __global__ void scale2(float* y, int n) {'
        r" int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] *= 2.f; }",
        "scale2",
    )
    x = torch.rand(1 << 20, device="cuda")

    def forward():
        y = x + 1  # glue
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernel(((y.numel() + 255) // 256,), (256,), (y.data_ptr(), cp.int32(y.numel())))
        return y

    with torch.no_grad(), policy_guard("kernelbench", inputs=[x], device="cuda") as g:
        g(forward)
    (entry,) = g.torch_op_summary
    assert entry["op"] == "aten::add" and entry["count"] == 1, g.torch_op_summary
    assert 0.0 < entry["share"] < 1.0, g.torch_op_summary
