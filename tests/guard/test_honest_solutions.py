"""Honest solutions the judge used to reject (issue 31), each at its mechanism, next to the hack the same
check must still catch. In process: the guard and the judge's RequestGuard on the CPU (Triton interpreted)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
import triton
import triton.language as tl
from guard_helpers import guarded

from kernels_env.guard import (
    GuardViolation,
    Integrity,
    ThreadSnapshot,
    TorchGlobalState,
    _checks,
    census_violations,
    check_outputs,
    thread_violations,
    warm_up_intra_op_pool,
)
from kernels_env.guard._census import census_from_profiler
from kernels_env.guard._frames import FrameClassifier
from kernels_env.judge.run import enforce
from kernels_env.judge.run.models import Reference
from kernels_env.rules.operators import CUSTOM, TORCH_KERNEL
from kernels_env.rules.policies import get_policy

HERE = Path(__file__)
CPU = torch.device("cpu")


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    y = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), factor, BLOCK=256)
    return y


class Candidate(nn.Module):
    """A custom kernel (the census sees one launch); ``touch`` is what it also does to the reference."""

    def __init__(self, touch=None):
        super().__init__()
        self.touch = touch

    def forward(self, x):
        if self.touch is not None:
            self.touch()
        return scale(x, 2.0)


@pytest.fixture
def request_guard(tmp_path):
    """The run worker's RequestGuard for a request whose candidate is this file (the reference: elsewhere).
    A factory: the worker's baseline is taken inside the test, where the test tiers' process guard is in place
    (its os.fork wrapper is then the baseline, not judge code replaced)."""
    saved = enforce.WORKER
    reference = tmp_path / "reference.py"
    reference.write_text("")

    def make() -> enforce.RequestGuard:
        state, threads = TorchGlobalState.capture(), ThreadSnapshot.capture()
        enforce.WORKER = enforce.WorkerSnapshot(CPU, Integrity.capture(), state, threads, None)
        return enforce.RequestGuard("kernelbench", CPU, HERE.parent, reference)

    yield make
    enforce.WORKER = saved


def _train_batchnorm() -> nn.Module:
    return nn.Sequential(nn.BatchNorm1d(4)).train()


def _nan_inputs() -> torch.Tensor:
    x = torch.rand(8, 4)
    x[3, 1] = float("nan")  # what the nan_inf family passes: one channel's batch statistics become NaN
    return x


# -- 4: a train-mode BatchNorm reference after the nan_inf family -------------------------------------------
def test_the_judges_reference_calls_leave_its_buffers_as_they_were():
    model = _train_batchnorm()
    before = {n: b.clone() for n, b in model.named_buffers()}
    out = Reference(model)([_nan_inputs()])
    assert torch.isnan(out[:, 1]).all()  # the reference itself computed on NaN
    for name, buf in model.named_buffers():
        assert torch.equal(buf, before[name]), name  # running stats neither NaN nor drifted


def test_nan_reference_buffers_are_not_tampering(request_guard):
    """A reference whose running stats hold NaN (restore or not): the candidate that leaves them alone is
    accepted; NaN != NaN must not read as a change."""
    guard = request_guard()
    ref = _train_batchnorm()
    ref[0].running_mean[1] = float("nan")
    guard.watch_reference(ref, type(ref))
    out = guard.call(Candidate(), [torch.rand(8, 4)])
    assert out.shape == (8, 4)


@pytest.mark.parametrize("nan_first", [False, True])
def test_a_candidate_writing_reference_buffers_is_still_caught(request_guard, nan_first):
    guard = request_guard()
    ref = _train_batchnorm()
    if nan_first:
        ref[0].running_mean[1] = float("nan")

    def tamper():
        ref[0].running_var.copy_(scale(ref[0].running_var, 3.0))  # its own kernel writes the reference's

    guard.watch_reference(ref, type(ref))
    with pytest.raises(GuardViolation) as caught:
        guard.call(Candidate(tamper), [torch.rand(8, 4)])
    assert caught.value.check == _checks.REFERENCE_TAMPERED


# -- 7: cudnn.benchmark -------------------------------------------------------------------------------------
def _flag_setter(name: str, value: bool, x: torch.Tensor):
    def forward():
        setattr(torch.backends.cudnn, name, value)
        return scale(x, 2.0)

    return forward


def test_cudnn_benchmark_alone_is_accepted_and_restored():
    before = torch.backends.cudnn.benchmark
    x = torch.rand(64)
    out, caught = guarded(_flag_setter("benchmark", not before, x), "kernelbench", inputs=[x])
    assert caught is None and out is not None
    assert torch.backends.cudnn.benchmark == before  # the judge's setting again for whatever runs next


def test_cudnn_benchmark_set_while_loading_is_accepted_and_restored(request_guard):
    guard = request_guard()
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = not before  # a solution's module-level line
    guard.after_load()
    assert torch.backends.cudnn.benchmark == before


def test_other_global_switches_are_still_global_state():
    before = torch.backends.cudnn.deterministic
    x = torch.rand(64)
    _, caught = guarded(_flag_setter("deterministic", not before, x), "kernelbench", inputs=[x])
    assert caught is not None and caught.check == _checks.GLOBAL_STATE
    assert torch.backends.cudnn.deterministic == before


# -- 6: the guard's own ranges in the GPU census (synthetic profiler events: no GPU here) ---
def _event(name, children=(), kernels=(), device=False, start=0.0, dur=1.0, annotation=False):
    e = SimpleNamespace(
        name=name,
        cpu_children=list(children),
        cpu_parent=None,
        kernels=[SimpleNamespace(name=k) for k in kernels],
        device_type=SimpleNamespace(name="CUDA" if device else "CPU"),
        time_range=SimpleNamespace(start=start, elapsed_us=lambda d=dur: d),
        is_user_annotation=annotation,
    )
    for c in e.cpu_children:
        c.cpu_parent = e
    return e


def test_record_function_ranges_on_the_device_timeline_are_not_kernels():
    """What the profiler reports for a guarded forward in which PyTorch did all the work: the dispatch guard's
    ``guard::<hex>`` range around the judged ``aten::relu``, mirrored on the device timeline as a user
    annotation, and a range the candidate opened itself named like a kernel. Neither is a custom launch."""
    marker = "guard::0123456789abcdef"
    relu = _event("aten::relu", kernels=["void at::native::vectorized_elementwise_kernel<4>"])
    cpu = [_event(marker, children=[relu]), relu, _event("my_relu_kernel")]
    device = [
        _event(marker, device=True, start=1, dur=30.0, annotation=True),
        _event("void at::native::vectorized_elementwise_kernel<4>", device=True, start=2, dur=20.0),
        _event("my_relu_kernel", device=True, start=3, dur=25.0, annotation=True),
    ]
    census = census_from_profiler(cpu + device, judged_marker=marker)
    assert [(k.name, k.category) for k in census.launches] == [
        ("void at::native::vectorized_elementwise_kernel<4>", TORCH_KERNEL)
    ]
    checks = [v.check for v in census_violations(census, get_policy("kernelbench"))]
    assert checks == [_checks.NO_CUSTOM_KERNEL]


def test_a_custom_kernel_next_to_the_guards_ranges_keeps_its_share():
    marker = "guard::0123456789abcdef"
    relu = _event("aten::relu", kernels=["elementwise"])
    cpu = [_event(marker, children=[relu]), relu]
    device = [
        _event(marker, device=True, start=1, dur=500.0, annotation=True),  # would dilute the share below
        _event("elementwise", device=True, start=2, dur=10.0),
        _event("fused_epilogue", device=True, start=3, dur=10.0),
    ]
    census = census_from_profiler(cpu + device, judged_marker=marker)
    assert census.share({CUSTOM}) == pytest.approx(0.5)


# -- 3: output strides --------------------------------------------------------------------------------------
def _strides_checks(candidate, reference):
    return [v.check for v in check_outputs(candidate, reference) if v.check == _checks.OUTPUT_STRIDES]


def test_gapped_strided_views_are_accepted_like_the_references_own():
    """A reference that returns a strided view (``y[:, ::2]``, ``y[..., :n]`` of a padded buffer): its own
    output and a candidate's in the same or another gapped layout are accepted."""
    ref = torch.rand(8, 12)[:, ::2]
    assert not ref.is_contiguous()
    assert _strides_checks(ref, ref) == []  # the reference's own output
    assert _strides_checks(torch.rand(8, 12)[:, ::2], ref) == []
    assert _strides_checks(torch.rand(8, 16)[:, 2:8], ref) == []  # a padded buffer's window
    assert _strides_checks(torch.rand(16, 8)[::2, :6], ref) == []
    assert _strides_checks(torch.rand(12, 8).t()[::2], ref) == []  # transposed and stepped
    assert _strides_checks(torch.rand(8, 6), ref) == []  # dense


def test_the_references_own_expanded_layout_is_accepted_but_no_other_overlap():
    ref = torch.rand(1, 6).expand(4, 6)  # a reference that returns a broadcast view
    assert _strides_checks(torch.rand(1, 6).expand(4, 6), ref) == []
    assert _strides_checks(torch.rand(6).as_strided((4, 6), (1, 0)), ref) == [_checks.OUTPUT_STRIDES]
    dense = torch.rand(4, 6)
    assert _strides_checks(torch.rand(1, 6).expand(4, 6), dense) == [_checks.OUTPUT_STRIDES]
    assert _strides_checks(torch.rand(64).as_strided((4, 6), (6, 2)), dense) == [_checks.OUTPUT_STRIDES]


# -- 2: ATen's intra-op pool --------------------------------------------------------------------------------
def _parallel_cpu_ops():
    """What a correct solution's C++ or Python does with CPU tensors large enough for ATen to go parallel."""
    y = torch.rand(1 << 21)
    return (y * 2).sum()


def test_atens_pool_started_inside_the_call_looked_like_a_background_thread():
    """The mechanism: a pool larger than any started so far starts its threads at the first parallel op."""
    n = torch.get_num_threads()
    torch.set_num_threads(n + 3)
    try:
        before = ThreadSnapshot.capture()
        _parallel_cpu_ops()
        found = thread_violations(before, FrameClassifier([__file__]), before)
        assert [v.check for v in found] == [_checks.BACKGROUND_THREAD]
    finally:
        torch.set_num_threads(n)


def test_the_worker_starts_atens_pool_before_its_thread_baseline():
    n, saved = torch.get_num_threads(), enforce.WORKER
    torch.set_num_threads(n + 6)  # again a pool no op has started yet
    try:
        snap = enforce.start_worker(CPU)
        _parallel_cpu_ops()
        assert thread_violations(snap.threads, FrameClassifier([__file__]), snap.threads) == []
    finally:
        torch.set_num_threads(n)
        enforce.WORKER = saved


def test_a_candidates_own_thread_is_still_caught_after_the_warm_up():
    import threading

    warm_up_intra_op_pool()
    before = ThreadSnapshot.capture()
    stop = threading.Event()
    worker = threading.Thread(target=lambda: stop.wait(), daemon=True)  # the candidate's code, still running
    worker.start()
    try:
        found = thread_violations(before, FrameClassifier([__file__]), before)
        assert [v.check for v in found][:1] == [_checks.BACKGROUND_THREAD]
    finally:
        stop.set()
        worker.join()


# -- 1: the kernelbench work share next to vendor-library kernels (synthetic GPU census: no GPU here) --
OUT_8192 = torch.empty(8192, 8192, device="meta")  # fp32: 256 MiB, the output of today's L2 GEMM problems
COPY_RATE = 4e12  # bytes/s read + write: an H200's measured device copy


def _kernelbench_census(*launches):
    """A GPU census from synthetic profiler events: (kernel, the ATen op that launched it or '', us)."""
    cpu, device = [], []
    for i, (kernel, op, us) in enumerate(launches):
        if op:
            cpu.append(_event(op, kernels=[kernel]))
        device.append(_event(kernel, device=True, start=i, dur=us))
    return census_from_profiler(cpu + device)


def _work_checks(census, outputs=(OUT_8192,)):
    from kernels_env.guard._guard import _pass_us

    pass_us = _pass_us(list(outputs), COPY_RATE)
    return [v.check for v in census_violations(census, get_policy("kernelbench"), pass_us)]


def test_a_gemm_in_nn_linear_with_a_fused_epilogue_kernel_is_accepted():
    """The false reject: an fp32 8192^3 GEMM in ``nn.Linear`` (cuBLAS, ~22 ms) and one custom kernel that
    fuses the whole epilogue (reads and writes the 256 MiB output: ~130 us, 0.6% of the device time)."""
    census = _kernelbench_census(
        ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32", "aten::linear", 22_000.0),
        ("fused_bias_gelu_scale_kernel", "", 130.0),
    )
    assert census.share({CUSTOM}) < 0.02
    assert _work_checks(census) == []


def test_a_decoy_next_to_a_library_gemm_is_still_low_custom_work():
    """``decoy_trivial_launch_kernelbench``: torch.matmul does the work, a kernel touches one element."""
    census = _kernelbench_census(
        ("sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x32", "aten::matmul", 22_000.0),
        ("touch_kernel", "", 2.0),
    )
    assert _work_checks(census) == [_checks.LOW_CUSTOM_WORK]
    small = torch.empty(2048, 2048, device="meta")  # the red-team case's size: 16 MiB, a 4.2 us pass
    census = _kernelbench_census(("ampere_sgemm_128x64_nn", "aten::matmul", 340.0), ("touch_kernel", "", 2.0))
    assert _work_checks(census, [small]) == [_checks.LOW_CUSTOM_WORK]


def test_a_decoy_next_to_pytorch_elementwise_work_is_still_low_custom_work():
    elementwise = "void at::native::vectorized_elementwise_kernel<4>"
    census = _kernelbench_census(
        (elementwise, "aten::mul", 200.0), (elementwise, "aten::add", 200.0), ("touch_kernel", "", 2.0)
    )
    assert _work_checks(census) == [_checks.LOW_CUSTOM_WORK]
    # a GEMM as well, and PyTorch glue that dwarfs the custom kernel: the vendor time is no excuse
    census = _kernelbench_census(
        ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32", "aten::linear", 22_000.0),
        (elementwise, "aten::gelu", 10_000.0),
        ("scale_kernel", "", 130.0),
    )
    assert _work_checks(census) == [_checks.LOW_CUSTOM_WORK]


def test_without_a_measured_copy_rate_the_share_rule_is_unchanged():
    census = _kernelbench_census(
        ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32", "aten::linear", 22_000.0),
        ("fused_bias_gelu_scale_kernel", "", 130.0),
    )
    assert [v.check for v in census_violations(census, get_policy("kernelbench"))] == [
        _checks.LOW_CUSTOM_WORK
    ]


def test_the_request_guard_passes_the_measured_copy_rate(request_guard):
    guard = request_guard()
    assert guard.copy_bandwidth is None  # no GPU: no measurement
    enforce.WORKER.peak_bandwidth = 2 * COPY_RATE  # the roofline's peak: twice the measured copy
    guard.shared_by = 3
    assert guard.copy_bandwidth == pytest.approx(3 * COPY_RATE)  # may have been shared at start: lenient
    enforce.WORKER.bandwidth_alone = True
    assert guard.copy_bandwidth == pytest.approx(COPY_RATE)
