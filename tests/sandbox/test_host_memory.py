"""The host-memory limit next to the memory plan (``kernels_env.judge.check.memory``, "Host memory"): the
worker's limit (``SandboxConfig.memory_limit_gb``) plus what the judge and the reference hold
(``host_bytes``).

On the H200 a correct solution of KernelBench L1 #45 (16 GiB input) was killed at the 16 GiB host limit
"during correctness": the judge's own host copy of the inputs, its failure blamed on the candidate. Here the
same shape at CPU scale: inputs that are small next to the limit, a judge footprint that is not (the
comparisons, the guard's copies, several answers at once), a limit of 1 GiB. Without the allowance this
solution was killed ("host memory 1.19 GiB exceeded the limit of 1.00 GiB (during correctness)")."""

from __future__ import annotations

import pytest
import torch

from kernels_env.client import SandboxClient
from kernels_env.judge.check.inputs import make_inputs
from kernels_env.rules.config import JudgeConfig

from .conftest import RELU_PROBLEM, cpu_config, relu_with, src

LIMIT_GB = 1.0  # a CPU run worker idles at ~0.4 GiB; the judge of the 64 MiB task below holds ~1.2 GiB more
LARGE = RELU_PROBLEM.replace("N = 1024", "N = 2**24")  # 64 MiB of float32 in, 64 MiB out
# PyTorch does the bulk (the kernelbench policy allows the glue), a Triton kernel the head: interpreted
# kernels over 64 MiB would take minutes on a CPU.
GLUE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.relu(x)
        relu_kernel[(1,)](x, out, 1024, BLOCK=1024)
        return out
"""
HOG = relu_with("hog = []\nwhile True:\n    hog.append(torch.ones(2**26))")  # tests/stress/soak.py's "memory"
# The reference holds 2 GiB of host memory for a moment: the judge's side (its code, the reference's) passes
# the limit. ``MARKER`` (formatted in): only while that file is missing, so a retry can find it there. The
# memory preflight's dry run of the reference on the meta device (judge/run/preflight.py) comes first and must
# not leave the marker: it is written only by a real run.
HOLDS = """
import os, time
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        if x.device.type != "meta" and not os.path.exists({marker!r}):
            if {once}:
                open({marker!r}, "w").close()
            hold = torch.ones(2**29)  # touched: resident
            time.sleep(1.0)  # the supervisor polls every 0.1 s
            del hold
        return torch.relu(x)

def get_inputs():
    return [torch.rand(1024) * 2 - 1]

def get_init_inputs():
    return []
"""
FAST = JudgeConfig(policy="kernelbench", time_candidate=False, num_trials=1, families=[], baselines=[])


@pytest.fixture(scope="module")
def small(cache_dir):
    with SandboxClient(cpu_config(cache_dir, memory_limit_gb=LIMIT_GB)) as sb:
        yield sb


def test_a_correct_solution_is_not_killed_for_the_judges_host_memory(small):
    res = small.evaluate(src(LARGE), src(GLUE), judge=FAST)
    assert res["status"] == "correct", res["error"]
    plan = res["judge"]["memory_plan"]
    assert plan["footprint"]["inputs"] == 2**26 and plan["host_bytes"] > 2**30  # recorded, > the task's 8x
    assert plan["retry"] is False


def test_a_host_memory_hog_is_still_the_candidates_runtime_error(small):
    res = small.evaluate(src(RELU_PROBLEM), HOG, judge=FAST)
    assert res["status"] == "runtime_error" and res["reward"] == -1.0, res["error"]
    assert "host memory" in res["error"] and "while the judge's code ran" not in res["error"]
    assert res["judge"]["memory_plan"] is not None  # the plan in force when the worker was killed


def test_the_judges_breach_is_retried_then_judge_error(small, tmp_path):
    problem = HOLDS.format(marker=str(tmp_path / "never"), once=False)
    res = small.evaluate(problem, src(GLUE), judge=FAST)
    assert res["status"] == "judge_error" and res["reward"] is None, res["error"]
    assert "while the judge's code ran" in res["error"] and "smaller memory plan" in res["error"]
    # Once only (a reference with a transient peak): the retry, on a fresh worker, judges it.
    problem = HOLDS.format(marker=str(tmp_path / "once"), once=True)
    res = small.evaluate(problem, src(GLUE), judge=FAST)
    assert res["status"] == "correct", res["error"]
    assert res["judge"]["memory_plan"]["retry"] is True
    assert any("first attempt was killed in the judge's code" in m.get("text", "") for m in res["messages"])


def test_a_device_out_of_memory_is_not_rebuilt_on_the_host(tmp_path):
    # The task's factories run on the GPU; an out-of-memory there once silently rebuilt the inputs on the
    # host (16 GiB of CPU tensors for L1 #45, past the host limit). Now it is raised: the judge's own OOM.
    path = tmp_path / "problem.py"
    path.write_text(
        "import torch\n"
        "from torch.overrides import _get_current_function_mode_stack as modes\n\n"
        "def get_inputs():\n"  # under make_inputs' torch.device('cuda'): no tensor may be made on this CPU
        "    if any(str(getattr(m, 'device', '')).startswith('cuda') for m in modes()):\n"
        "        raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 16.00 GiB')\n"
        "    return [torch.rand(4)]\n"
    )
    with pytest.raises(torch.OutOfMemoryError):
        make_inputs(str(path), 0, "random", "cuda")
