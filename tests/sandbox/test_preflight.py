"""Memory before running (``kernels_env.judge.run.preflight``, issue 31): the footprint estimated from a
problem's source on the meta device, in-process, without allocating the problem's tensors."""

from __future__ import annotations

import textwrap

import psutil
import pytest
import torch

from kernels_env.judge.build.loader import Problem
from kernels_env.judge.check import memory
from kernels_env.judge.check.inputs import make_inputs
from kernels_env.judge.run import preflight
from kernels_env.rules.result import INSUFFICIENT_MEMORY, NO_VERDICT
from kernels_env.rules.rewards import REWARDS, get_reward

GiB = memory.GiB

# get_inputs returns 40 GB of float32: more than this (or any CI) host has; the estimate must not build it.
HUGE_PROBLEM = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.relu(x)

    def get_inputs():
        return [torch.rand(10**10)]

    def get_init_inputs():
        return []
    """
)

# Temporaries by hand (N float32 elements each, B = 4N bytes): a = 2x (1B live), b = a + 1 (2B), del a (1B),
# c = 3b (2B), out = cat(b, c) (4B: the peak), return out (2B). Outputs 2B, workspace = peak - out = 2B;
# the Linear's parameters are counted apart (2 x 3 weights + 2 biases).
TEMPS_PROBLEM = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    N = 4096

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            a = x * 2
            b = a + 1
            del a
            c = b * 3
            return torch.cat([b, c])

    def get_inputs():
        return [torch.rand(N)]

    def get_init_inputs():
        return []
    """
)


def _problem(source: str, name: str = "problem.py") -> Problem:
    return Problem(None, None, None, None, source, f"/virtual/{name}")  # inputs come from ``source`` alone


def test_a_40_gb_problem_is_estimated_without_allocating_it():
    rss = psutil.Process().memory_info().rss
    est = preflight.estimate(_problem(HUGE_PROBLEM))
    assert psutil.Process().memory_info().rss - rss < GiB // 2  # nothing of 40 GB was built
    assert est is not None and est.exact
    assert (est.footprint.inputs, est.footprint.outputs, est.footprint.params) == (4 * 10**10, 4 * 10**10, 0)
    # The trials' peak (4 inputs + 5 outputs) with the comparisons' chunks and the margin.
    need = preflight.required_bytes(est.footprint, "cpu")
    assert need == int(preflight.MARGIN * (9 * 4 * 10**10 + memory.scan_bytes(est.footprint)))


def test_the_dry_run_counts_outputs_temporaries_and_parameters_by_hand():
    est = preflight.estimate(_problem(TEMPS_PROBLEM))
    b = 4 * 4096
    assert est is not None and est.exact, est
    assert est.footprint == memory.Footprint(inputs=b, outputs=2 * b, workspace=2 * b, params=(6 + 2) * 4)
    # The inputs and outputs agree with a real call measured by the judge's own ``memory.measure``.
    problem = _problem(TEMPS_PROBLEM)
    mod = preflight.problem_module(problem)
    model = mod.Model()
    real = memory.measure(lambda xs: model(*xs), make_inputs(problem, 0), 0, torch.device("cpu"))
    assert (real.inputs, real.outputs) == (est.footprint.inputs, est.footprint.outputs)


def test_too_large_is_a_one_line_verdict_without_reward(monkeypatch):
    monkeypatch.setattr(memory, "_host_available", lambda: 9 * GiB)
    payload = preflight.check(_problem(HUGE_PROBLEM), torch.device("cpu"))
    assert payload is not None and payload["status"] == INSUFFICIENT_MEMORY and payload["stage"] == "load"
    error = payload["error"]
    assert "\n" not in error and "needs ~" in error and "this host has 9.00 GiB free" in error, error
    assert payload["memory_estimate"]["free_bytes"] == 9 * GiB and payload["memory_estimate"]["exact"]
    assert INSUFFICIENT_MEMORY in NO_VERDICT
    assert all(get_reward(name)(INSUFFICIENT_MEMORY, {}) is None for name in REWARDS)


def test_a_problem_that_fits_is_judged_and_the_budget_is_no_limit(monkeypatch):
    monkeypatch.setattr(memory, "_host_available", lambda: 64 * 2**20)
    assert preflight.check(_problem(TEMPS_PROBLEM), torch.device("cpu")) is None  # ~0.2 MiB of 64 MiB
    monkeypatch.setattr(memory, "_host_available", lambda: 100 * 2**10)  # 100 KiB: the trials need more
    assert preflight.check(_problem(TEMPS_PROBLEM), torch.device("cpu"))["status"] == INSUFFICIENT_MEMORY


DATA_DEPENDENT = TEMPS_PROBLEM.replace("a = x * 2", "a = x * float(x.sum())")
NUMPY_INPUTS = TEMPS_PROBLEM.replace("[torch.rand(N)]", "[torch.from_numpy(__import__('numpy').ones(N))]")
assert DATA_DEPENDENT != TEMPS_PROBLEM and NUMPY_INPUTS != TEMPS_PROBLEM


def test_a_reference_that_cannot_run_on_meta_counts_only_what_is_known(monkeypatch):
    est = preflight.estimate(_problem(DATA_DEPENDENT))
    assert est is not None and not est.exact and "meta" in est.why, est
    assert est.footprint == memory.Footprint(4 * 4096, 0, 0, 32)  # a lower bound: inputs and parameters
    monkeypatch.setattr(memory, "_host_available", lambda: 1024)
    payload = preflight.check(_problem(DATA_DEPENDENT), torch.device("cpu"))
    assert "needs at least ~" in payload["error"] and "dry run failed" in payload["messages"][0]["text"]
    # Inputs built from numpy are real tensors: counted (float64), and the dry run still runs on meta.
    est = preflight.estimate(_problem(NUMPY_INPUTS))
    assert est.exact and est.footprint == memory.Footprint(8 * 4096, 16 * 4096, 16 * 4096, 32)
    # Inputs whose construction needs data (a value read back): no estimate, judged as before.
    sized = "[torch.rand(int(torch.rand(1).item() * N) + 1)]"
    unknown = _problem(TEMPS_PROBLEM.replace("[torch.rand(N)]", sized))
    assert preflight.estimate(unknown) is None and preflight.check(unknown, torch.device("cpu")) is None


@pytest.mark.parametrize("shared_by", [1, 2])
def test_the_check_uses_the_workers_share(monkeypatch, shared_by):
    monkeypatch.setattr(memory, "_host_available", lambda: 1 << 50)
    monkeypatch.setattr(memory, "device_share", lambda device, n: 100 * 2**10)
    payload = preflight.check(_problem(TEMPS_PROBLEM), torch.device("cpu"), shared_by)
    if shared_by == 1:
        assert payload is None
    else:
        assert "this worker's share of the host is 100.00 KiB free" in payload["error"]
