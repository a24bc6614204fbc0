"""Global torch state and judge-code integrity snapshots."""

from __future__ import annotations

import time

import torch

from kernels_env.guard import Integrity, TorchGlobalState, _checks


def test_global_state_diff_and_restore():
    state = TorchGlobalState.capture()
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = not tf32
        torch.set_flush_denormal(True)
        torch.set_default_dtype(torch.float64)
        changed = state.diff()
        assert {"cuda.matmul.allow_tf32", "default_dtype"} <= set(changed)
        checks = {v.evidence["flag"]: v.check for v in state.violations()}
        assert checks["cuda.matmul.allow_tf32"] == _checks.PRECISION_STATE
        assert checks["default_dtype"] == _checks.PRECISION_STATE
        if torch.set_flush_denormal(True):  # FTZ supported on this CPU
            assert checks["flush_denormal"] == _checks.PRECISION_STATE
    finally:
        state.restore()
    assert torch.backends.cuda.matmul.allow_tf32 == tf32
    assert torch.get_default_dtype() == torch.float32
    assert state.diff() == {}


def test_integrity_catches_replacement_code_swap_and_added_methods():
    snap = Integrity.capture()
    real_clock = time.perf_counter
    real_code = torch.testing.assert_close.__code__
    try:
        time.perf_counter = lambda: 0.0
        torch.testing.assert_close.__code__ = (lambda *a, **k: None).__code__
        torch.Tensor.abs = lambda self: self  # shadows the C method for every tensor
        changed = snap.changed()
        assert "time.perf_counter" in changed
        assert "torch.testing.assert_close" in changed
        assert "torch.Tensor.abs (added)" in changed
        assert snap.violations()[0].check == _checks.JUDGE_TAMPERED
    finally:
        snap.restore()
    assert time.perf_counter is real_clock
    assert torch.testing.assert_close.__code__ is real_code
    assert "abs" not in vars(torch.Tensor)
    assert snap.changed() == []


def test_integrity_ignores_plain_data():
    snap = Integrity.capture()
    import kernels_env.guard._watch as watch

    before = watch._INSTALLED
    watch._INSTALLED = not before
    try:
        assert snap.changed() == []
    finally:
        watch._INSTALLED = before


def test_judge_classes_and_reply_encoding_are_covered():
    """Methods of the judge's own classes (the guard's checks) and what replies are written with."""
    import json

    from kernels_env.guard import _guard

    integrity = Integrity.capture()
    original_finish, original_dumps = _guard.Guard._finish, json.dumps
    try:
        _guard.Guard._finish = lambda self, exc: None
        json.dumps = lambda *a, **k: "{}"
        changed = integrity.changed()
        assert "kernels_env.guard._guard.Guard._finish" in changed and "json.dumps" in changed, changed
    finally:
        integrity.restore()
    assert _guard.Guard._finish is original_finish and json.dumps is original_dumps
    assert integrity.changed() == []


def test_default_dtype_is_reported_as_global_state_not_tampering():
    integrity, state = Integrity.capture(), TorchGlobalState.capture()
    try:
        torch.set_default_dtype(torch.float64)  # torch rebinds torch.Storage itself
        assert integrity.changed() == []
        assert [v.evidence["flag"] for v in state.violations()] == ["default_dtype"]
    finally:
        state.restore()


def test_integrity_covers_the_statistics_the_timing_summary_uses():
    """Patching ``statistics.median`` shrinks every reported median without touching a clock (red-team
    ``patch_statistics_while_timed``): it is judge code too."""
    import statistics

    snap = Integrity.capture()
    real = statistics.median
    try:
        statistics.median = lambda xs: 0.0
        assert "statistics.median" in snap.changed()
        assert snap.violations()[0].check == _checks.JUDGE_TAMPERED
    finally:
        snap.restore()
    assert statistics.median is real and snap.changed() == []
