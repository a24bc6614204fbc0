"""CPU mode end to end: Triton under the interpreter, plain PyTorch on the CPU, CUDA sources compiled for real
(nvcc) and reported ``not_run``; workspaces; weight synchronisation; baselines and their cache."""

from __future__ import annotations

import textwrap

import pytest

from kernels_env.rules.config import JudgeConfig
from kernels_env.rules.result import validate

from .conftest import FAST, KERNELS, LINEAR_PROBLEM, RELU_PROBLEM, RELU_TORCH, RELU_TRITON, relu_with, src

REF = src(RELU_PROBLEM)

# A CUDA solution built by a direct nvcc call at import (the way a workspace's own build script would).
# Its CompileError mimics the fast path's (.diagnostics, .log): the sandbox recognises it by duck typing.
NVCC_SOLUTION = '''
import os, subprocess, tempfile
import torch
import torch.nn as nn

SOURCE = r"""
__global__ void relu_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;%s
}
"""

class CompileError(RuntimeError):
    def __init__(self, log):
        super().__init__("nvcc failed")
        self.log = log
        self.diagnostics = []

def build():
    d = tempfile.mkdtemp()
    src = os.path.join(d, "relu.cu")
    with open(src, "w") as f:
        f.write(SOURCE)
    out = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", src, "-o", src + ".cubin"],
                         capture_output=True, text=True)
    if out.returncode:
        raise CompileError(out.stderr)
    return src + ".cubin"

CUBIN = build()

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("launching needs a CUDA device")
'''


def test_triton_runs_under_the_interpreter_with_non_comparable_timings(client):
    res = client.evaluate(REF, src(RELU_TRITON), judge=JudgeConfig(num_trials=2))
    validate(res)
    assert res["status"] == "correct" and res["reward"] == 1.0 and "triton" in res["backends"]
    t = res["timings"]
    assert t["comparable"] is False and t["candidate"]["count"] >= 1 and t["candidate"]["median_ms"] > 0
    assert t["baselines"]["eager"]["median_ms"] > 0
    assert "skipped" in t["baselines"]["compile"] and "skipped" in t["baselines"]["max-autotune"]
    assert res["speedups"] == {"eager": None, "compile": None, "max-autotune": None}
    assert (
        len(res["correctness"]["seeds"]) == 2
        and res["correctness"]["seeds"][0] != res["correctness"]["seeds"][1]
    )
    env = res["environment"]
    assert env["device"] == "cpu" and env["torch"] and res["judge"]["protocol"] == "kernelbench"


def test_cuda_source_compiles_for_real_and_is_not_run(client):
    res = client.evaluate(REF, NVCC_SOLUTION % "", judge=FAST)
    validate(res)
    assert res["status"] == "not_run" and res["reward"] is None and res["stage"] == "compile"
    assert "nvcc" in res["backends"]


def test_cuda_compile_error_has_nvcc_diagnostics(client):
    res = client.evaluate(REF, NVCC_SOLUTION % "\n    undefined_name += 1;", judge=FAST, solution_name="k.py")
    assert res["status"] == "compile_error" and res["reward"] == -1.0
    diag = next(m for m in res["messages"] if m["kind"] == "compiler")
    assert diag["line"] == 5 and diag["file"].endswith("relu.cu") and "undefined_name" in diag["message"]
    assert "relu.cu:5" in res["error"]


def test_solution_that_needs_a_gpu_at_run_time_is_not_run(client):
    res = client.evaluate(REF, relu_with("return torch.clamp(x.cuda(), min=0.0)"), judge=FAST)
    assert res["status"] == "not_run" and res["reward"] is None and "CUDA" in res["error"]


def test_python_workspace(client, tmp_path):
    ws = tmp_path / "1_relu"
    (ws / "helpers").mkdir(parents=True)
    (ws / "helpers" / "__init__.py").write_text("")
    (ws / "helpers" / "ops.py").write_text("import torch\n\ndef relu(x):\n    return x.view(3, -1)\n")
    (ws / "model_new.py").write_text(
        textwrap.dedent("""
        import torch.nn as nn
        from helpers.ops import relu

        class ModelNew(nn.Module):
            def forward(self, x):
                return relu(x)
    """)
    )
    res = client.evaluate(REF, ws, judge=FAST)
    assert res["status"] == "runtime_error" and res["solution"] == "1_relu"
    tb = next(m["text"] for m in res["messages"] if m["kind"] == "traceback")
    assert 'File "1_relu/helpers/ops.py", line 4, in relu' in tb and 'File "1_relu/model_new.py"' in tb
    (ws / "helpers" / "ops.py").write_text("import torch\n" + KERNELS)
    assert client.evaluate(REF, ws, judge=FAST)["status"] == "correct"


LINEAR_SAME_NAMES = (
    "import torch\nimport torch.nn as nn\n"
    + KERNELS
    + """
class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)  # holds the weights; never called

    def forward(self, x):
        return linear(x, self.fc.weight, self.fc.bias)
"""
)
LINEAR_OTHER_NAMES = (
    "import torch\nimport torch.nn as nn\n"
    + KERNELS
    + """
class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)  # same creation order, other names

    def forward(self, x):
        return linear(x, self.proj.weight, self.proj.bias)
"""
)


@pytest.mark.parametrize(
    ("solution", "sync", "expected", "method"),
    [
        (LINEAR_SAME_NAMES, "state_dict", "correct", "state_dict"),
        (LINEAR_OTHER_NAMES, "auto", "correct", "seed"),
        (LINEAR_OTHER_NAMES, "seed", "correct", "seed"),
        (LINEAR_OTHER_NAMES, "state_dict", "runtime_error", None),
    ],
    ids=["same-names-state_dict", "other-names-auto", "other-names-seed", "other-names-state_dict"],
)
def test_weight_synchronisation(client, solution, sync, expected, method):
    judge = JudgeConfig(
        protocol="cuda_agent", weight_sync=sync, num_trials=2, time_candidate=False, families=[]
    )
    res = client.evaluate(src(LINEAR_PROBLEM), src(solution), judge=judge)
    assert res["status"] == expected, res["error"]
    if method:
        assert res["correctness"]["weight_sync"]["method"] == method and res["correctness"]["mode"] == "eval"
    else:
        assert "state_dict sync" in res["error"] and "proj.weight" in res["error"]


def test_candidate_first_order_and_tolerance_override(client):
    off = relu_with("return relu(x, shift=-5e-3)")  # max(x + 5e-3, 0)
    assert client.evaluate(REF, off, judge=FAST)["status"] == "incorrect"
    loose = JudgeConfig(order="candidate_first", atol=1e-2, num_trials=2, time_candidate=False, families=[])
    res = client.evaluate(REF, off, judge=loose)
    assert res["status"] == "correct" and res["correctness"]["order"] == "candidate_first"


def test_baselines_are_cached_and_keyed_on_the_reference(client):
    judge = JudgeConfig(baselines=["eager", "compile"])
    measured = len(client.baseline_seconds())
    first = client.baseline(REF + "\n# variant A\n", judge=judge)
    assert first["device"] == "cpu" and "median_ms" in first["baselines"]["eager"]
    assert len(client.baseline_seconds()) == measured + 1 and client.baseline_seconds()[-1] > 0
    client.baseline(REF + "\n# variant A\n", judge=judge)  # in memory: no worker time
    assert len(client.baseline_seconds()) == measured + 1
    assert "skipped" in first["baselines"]["compile"]
    client._baselines.clear()  # forget the in-memory copy: the next answer must come from the disk cache
    again = client.baseline(REF + "\n# variant A\n", judge=judge)
    assert again["baselines"]["eager"]["cached"] is True
    assert again["baselines"]["eager"]["median_ms"] == first["baselines"]["eager"]["median_ms"]
    other = client.baseline(REF + "\n# variant B\n", judge=judge)
    assert other["baselines"]["eager"]["cached"] is False


def test_plain_torch_is_rejected_under_every_policy(client):
    """strict and cuda_agent refuse the operator itself; kernelbench allows it as glue, and the census then
    finds no custom kernel next to it."""
    for policy, check in (
        ("strict", "forbidden_op"),
        ("cuda_agent", "forbidden_op"),
        ("kernelbench", "no_custom_kernel"),
    ):
        judge = JudgeConfig(policy=policy, time_candidate=False, num_trials=2, families=[])
        res = client.evaluate(REF, src(RELU_TORCH), judge=judge)
        assert res["status"] == "rejected" and res["check"] == check, (policy, res["error"])
        assert res["backends"] == ["torch"] and res["reward"] == -1.0 and res["judge"]["guard_enforced"]
        if check == "forbidden_op":
            assert "aten.clamp" in res["error"]
            assert res["evidence"]["frame"].endswith("torch.clamp(x, min=0.0)")


def test_fastpath_examples_in_cpu_mode(client):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "examples"
    res = client.evaluate(root / "problems/1_relu.py", root / "solutions/1_relu__cuda.py", judge=FAST)
    assert res["status"] == "not_run" and "fastpath" in res["backends"], res["error"]
    res = client.evaluate(
        root / "problems/9_rmsnorm.py", root / "solutions/9_rmsnorm__cuda_typo.py", judge=FAST
    )
    assert res["status"] == "compile_error" and "epsilon" in res["error"]
    assert any(m.get("line") for m in res["messages"] if m["kind"] == "compiler")
    res = client.evaluate(
        root / "problems/5_sum_reduction.py", root / "solutions/5_sum_reduction", judge=FAST
    )
    assert res["status"] == "not_run", res["error"]
