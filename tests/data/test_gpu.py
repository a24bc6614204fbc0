"""GPU-side pieces (``gpu`` marker: skipped without CUDA): the runtime window through the real sandbox."""

from __future__ import annotations

import pytest

from research.data.config import GpuFilterConfig, SynthesisConfig
from research.data.gpu_filter import apply_window, make_timer
from research.data.records import TaskRecord

from .test_filters import GOOD

pytestmark = pytest.mark.gpu


def test_sandbox_times_a_task_on_the_gpu():
    timer = make_timer(GpuFilterConfig(timeout_s=300))
    try:
        res = timer.time(TaskRecord(id="g", source=GOOD))
    finally:
        timer.close()
    assert res["ok"], res
    assert 0.0 < res["eager_ms"] < 1000.0 and res["gpu"] not in (None, "cuda")


def test_synthesized_task_runs_at_real_size_on_the_gpu():
    from research.data.candidates import make_candidate
    from research.data.ops import Reject

    cfg = SynthesisConfig()
    for j in range(40):
        try:
            cand = make_candidate(cfg, "2", j)
            break
        except Reject:
            continue
    timer = make_timer(GpuFilterConfig(timeout_s=300))
    try:
        res = timer.time(cand.record)
    finally:
        timer.close()
    assert res["ok"], res
    reason, detail = apply_window(cand.record, res, 0.0, 10_000.0)
    assert reason is None, detail
    assert res["gpu"] in cand.record.baselines
