"""A request still queued or running when its client closes never starts the workers again: request threads
only use the fleet they were submitted to (a CPU run of load_inline_throughput --budget-s hung at exit on
workers a late request had restarted through the verdict's ``environment``)."""

from __future__ import annotations

import pytest

from kernels_env.client import SandboxClient, SandboxConfig, SandboxError
from kernels_env.rules.messages import Source
from kernels_env.rules.result import JUDGE_ERROR


class _ClosedFleet:
    """A fleet that was started and closed: starting it again is the bug."""

    started = False
    tmp = None
    device = "cpu"
    timing_lock = False

    def __init__(self):
        self.starts = 0

    def start(self):
        self.starts += 1

    def environment(self):
        return {}

    def close(self):
        pass


@pytest.fixture
def closed(tmp_path):
    client = SandboxClient(SandboxConfig(device="cpu", cache_dir=str(tmp_path)))
    fleet = client._fleet = _ClosedFleet()
    return client, fleet


def test_a_request_after_close_ends_without_restarting_the_workers(closed):
    client, fleet = closed
    ref = Source(name="ref.py", text="import torch\n")
    with pytest.raises(SandboxError, match="closed before this request ran"):
        client._pipeline.evaluate(ref, ref, {}, {"problem": "p", "solution": "s"})
    assert fleet.starts == 0


def test_a_judge_error_verdict_does_not_restart_a_closed_fleet(closed):
    client, fleet = closed
    report = {"stage": "done", "error": "boom", "messages": []}
    result = client._pipeline.fallback(report, {}, {"problem": "p", "solution": "s"}, "rid")
    assert result["status"] == JUDGE_ERROR and result["environment"] == {} and fleet.starts == 0
