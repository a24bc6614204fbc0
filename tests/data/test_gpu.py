"""GPU-side pieces (``gpu`` marker: skipped without CUDA): the direct timer and the sandbox client."""

from __future__ import annotations

import pytest

from research.data.config import GpuFilterConfig, SynthesisConfig
from research.data.gpu_filter import DirectTimer, SandboxTimer, apply_window
from research.data.records import TaskRecord

from .test_filters import GOOD

pytestmark = pytest.mark.gpu


def test_direct_timer_times_a_task_on_the_gpu():
    timer = DirectTimer(GpuFilterConfig(timer="direct", timeout_s=120))
    try:
        res = timer.time(TaskRecord(id="g", source=GOOD))
    finally:
        timer.close()
    assert res["ok"], res
    assert 0.0 < res["eager_ms"] < 1000.0 and res["gpu"]


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
    timer = DirectTimer(GpuFilterConfig(timer="direct", timeout_s=300))
    try:
        res = timer.time(cand.record)
    finally:
        timer.close()
    assert res["ok"], res
    reason, detail = apply_window(cand.record, res, 0.0, 10_000.0)
    assert reason is None, detail
    assert res["gpu"] in cand.record.baselines


def test_sandbox_client_baseline_when_available():
    client_mod = pytest.importorskip("kernels_env.client")
    config_mod = pytest.importorskip("kernels_env.config")
    with client_mod.SandboxClient(config_mod.SandboxConfig(device="cuda")) as sb:
        res = SandboxTimer(sb).time(TaskRecord(id="s", source=GOOD))
    assert res["ok"], res
    assert res["eager_ms"] > 0
