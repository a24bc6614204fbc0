"""The tools in this process (as a worker runs them): limits and truncation, the compile tool end to end
(real nvcc and NVRTC), Python errors as diagnostics, the cheap profile and roofline on CPU, the profiling
target."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap

import pytest
from tools_fixtures import PROBLEMS

from kernels_env.tools import run_tool
from kernels_env.tools._context import fit_json, run_cmd

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not __import__("os").path.exists("/usr/local/cuda/bin/nvcc"),
    reason="needs nvcc",
)


def test_fit_json_shrinks_strings_and_lists():
    obj = {"text": "x" * 5000, "items": [{"m": "y" * 200} for _ in range(100)], "n": 1}
    out, cut = fit_json(obj, 2000)
    assert cut and len(json.dumps(out)) <= 2000 and out["n"] == 1
    same, cut = fit_json({"a": 1}, 2000)
    assert not cut and same == {"a": 1}


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_run_cmd_kills_the_process_group_on_timeout():
    res = run_cmd(["bash", "-c", "sleep 30 & sleep 30"], 0.5)
    assert res.timed_out and res.returncode is None and res.elapsed_s < 10


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_run_cmd_keeps_only_the_tail():
    res = run_cmd([sys.executable, "-c", "print('a' * 100000)"], 30, max_bytes=1000)
    assert len(res.stdout) < 1100 and "truncated" in res.stdout


def test_unknown_tool_and_bad_requests():
    assert "unknown tool" in run_tool("nope", {})["error"]
    assert "args must be" in run_tool("compile", [1, 2])["error"]
    assert "limit" in run_tool("compile", {"solution": "x"}, {"time_s": 5, "bogus": 1})["error"]
    assert "needs 'solution'" in run_tool("compile", {})["error"]
    assert "not found" in run_tool("compile", {"solution": "/nonexistent/sol.py"})["error"]


def workspace(tmp_path):
    """kernels/add.cu (a warning) and a CuPy kernel with an error inside model_new.py's string."""
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "kernels" / "add.cu").write_text(
        textwrap.dedent("""\
        extern "C" __global__ void add_one(float4* x, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            int unused = 0;
            if (i < n) { float4 v = x[i]; v.x += 1.f; x[i] = v; }
        }
        """)
    )
    (ws / "model_new.py").write_text(
        textwrap.dedent('''\
        import torch
        import cupy

        SRC = r"""
        extern "C" __global__ void relu_k(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = x[i] > 0.f ? x[i] : undefined_thing;
        }
        """
        kern = cupy.RawKernel(SRC, "relu_k")


        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return x
        ''')
    )
    return ws


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
@needs_nvcc
def test_compile_tool_workspace_diagnostics_resources_and_sass(tmp_path):
    ws = workspace(tmp_path)
    resp = run_tool("compile", {"solution": str(ws), "sass": True, "arch": "sm_90"})
    r = resp["result"]
    assert not resp["ok"] and r["errors"] == 1 and r["warnings"] == 1
    err = r["diagnostics"][0]  # errors first
    # the error inside the Python string maps back to the line (and column) of model_new.py the agent edits
    assert (err["file"], err["line"], err["column"]) == ("model_new.py", 7, 43)
    assert "undefined_thing" in err["message"] and err["source"].endswith("undefined_thing;")
    warn = next(d for d in r["diagnostics"] if d["severity"] == "warning")
    assert (warn["file"], warn["line"], warn["code"]) == ("kernels/add.cu", 3, "177-D")
    (k,) = r["kernels"]
    assert k["name"] == "add_one" and k["registers"] > 0 and not k["spills"]
    if k.get("sass"):  # a disassembler (CUDA toolkit or Triton's bundled one) was found
        assert k["sass"]["global_loads_by_width"] == {"128": 1}
    assert "model_new.py:7:43: error" in resp["text"] and "add_one" in resp["text"]


FASTPATH_WS = '''\
from pathlib import Path

import torch
from kernels_env.fastpath import nvrtc_kernel, workspace_library

LIB = workspace_library(Path(__file__).parent)
NEG = nvrtc_kernel(r"""
extern "C" __global__ void neg(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = -x[i] + oops;
}
""", "neg")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''
SCALE_CU = """#include <cuda_runtime.h>
__global__ void scale_k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.f * x[i];
}
extern "C" int scale(const float* x, float* y, int n, cudaStream_t s) {
    scale_k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
    return 0;
}
"""


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
@needs_nvcc
def test_compile_tool_reports_the_fast_paths_own_builds(tmp_path):
    """workspace_library (nvcc) and nvrtc_kernel builds are observed as they ran, not recompiled: resources
    of the library's kernel, and the NVRTC error mapped from its string to model_new.py."""
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "kernels" / "scale.cu").write_text(SCALE_CU)
    (ws / "model_new.py").write_text(FASTPATH_WS)
    resp = run_tool("compile", {"solution": str(ws), "sass": True})
    r = resp["result"]
    origins = [u["origin"] for u in r["units"]]
    assert origins == ["fastpath.cuda_library", "fastpath.nvrtc_kernel"]  # scale.cu is not compiled twice
    assert r["units"][0]["ok"] and not r["units"][1]["ok"]
    (k,) = r["kernels"]
    assert k["short_name"] == "scale_k" and k["demangled"].startswith("scale_k(") and k["registers"] > 0
    (err,) = r["diagnostics"]
    assert (err["file"], err["line"], err["unit"], err["unit_line"]) == ("model_new.py", 10, "neg.cu", 4)
    assert not resp["ok"] and "model_new.py:10:31: error" in resp["text"]


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
@needs_nvcc
def test_compile_output_limit_truncates(tmp_path):
    ws = workspace(tmp_path)
    resp = run_tool("compile", {"solution": str(ws)}, {"max_output_bytes": 600})
    assert resp["truncated"] and len(json.dumps(resp)) <= 600


def test_python_errors_are_diagnostics(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text("class ModelNew(:\n    pass\n")
    r = run_tool("compile", {"solution": str(sol)})
    d = r["result"]["diagnostics"][0]
    assert not r["ok"] and (d["file"], d["line"]) == ("sol.py", 1) and "SyntaxError" in d["message"]
    sol.write_text(
        "import torch\n\n\ndef helper():\n    raise ValueError('bad constant')\n\n\nX = helper()\n"
    )
    d = run_tool("compile", {"solution": str(sol)})["result"]["diagnostics"][0]
    assert (d["file"], d["line"]) == ("sol.py", 5) and "bad constant" in d["message"]
    assert "Traceback" in d["traceback"] and str(tmp_path) not in d["traceback"]
    sol.write_text("class Model:\n    pass\n")
    d = run_tool("compile", {"solution": str(sol)})["result"]["diagnostics"][0]
    assert "no class ModelNew" in d["message"]


def test_events_profile_on_cpu_and_roofline(tmp_path):
    r = run_tool(
        "profile", {"reference": str(PROBLEMS / "ref_small.py"), "solution": str(tmp_path / "sol.py")}
    )
    assert not r["ok"] and "not found" in r["error"]
    sol = tmp_path / "sol.py"
    sol.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n"
    )
    r = run_tool(
        "profile",
        {
            "reference": str(PROBLEMS / "ref_small.py"),
            "solution": str(sol),
            "mode": "events",
            "device_name": "H200",
            "iters": 3,
        },
    )
    res = r["result"]
    assert r["ok"] and res["mode"] == "events" and res["candidate"]["kernels"][0]["short_name"] == "aten::add"
    assert res["reference"]["kernels"][0]["short_name"] == "aten::mul"
    assert res["roofline"]["counts"]["compulsory_bytes"] == 2 * 4096 * 4
    assert "roofline: floor" in r["text"]


def test_profile_reports_where_the_candidate_fails_to_import(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text("import torch\n\nraise RuntimeError('boom at import')\n")
    r = run_tool(
        "profile", {"reference": str(PROBLEMS / "ref_small.py"), "solution": str(sol), "mode": "events"}
    )
    assert not r["ok"] and r["error"].startswith("sol.py:3: error:") and "boom at import" in r["error"]
    assert r["diagnostic"]["line"] == 3 and "Traceback" in r["text"]


@pytest.mark.integration  # a subprocess or sandbox worker, ~8 s
def test_profiling_target_runs_reference_then_candidate_on_cpu(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    )
    res = tmp_path / "r.json"
    cmd = [
        sys.executable,
        "-m",
        "kernels_env.tools._target",
        "--reference",
        str(PROBLEMS / "ref_small.py"),
        "--solution",
        str(sol),
        "--which",
        "both",
        "--mode",
        "once",
        "--device",
        "cpu",
        "--result",
        str(res),
    ]
    out = run_cmd(cmd, 120)
    status = json.loads(res.read_text())
    assert out.returncode == 0 and status["ok"], status
    assert "reference_forward_s" in status and "candidate_forward_s" in status
    sol.write_text("raise RuntimeError('boom at import')\n")
    out = run_cmd(cmd, 120)
    status = json.loads(res.read_text())
    assert out.returncode == 1 and not status["ok"] and "boom at import" in status["error"]
    assert status["diagnostic"]["line"] == 1


@pytest.mark.integration  # a subprocess or sandbox worker, ~12 s
def test_cheap_profile_in_a_fresh_process(tmp_path):
    """On a GPU the cheap profile runs in ``_target --mode events`` (CUPTI never attaches to a worker); the
    same path on CPU: results come back, and a candidate that does not import is a diagnostic."""
    from kernels_env.tools import ToolContext
    from kernels_env.tools._candidate import CandidateError
    from kernels_env.tools._profile import _events_in_target

    sol = tmp_path / "sol.py"
    sol.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x + x\n"
    )
    args = {"reference": str(PROBLEMS / "ref_small.py"), "solution": str(sol)}
    ctx = ToolContext()
    try:
        out = _events_in_target(args, ctx, 1, 2, True, "cpu")
        assert out["candidate"]["kernels"][0]["short_name"] == "aten::add"
        assert out["reference"]["kernels"][0]["short_name"] == "aten::mul"
        sol.write_text("import torch\nx = (\n")
        with pytest.raises(CandidateError) as err:
            _events_in_target(args, ctx, 1, 2, False, "cpu")
        assert err.value.diagnostic["line"] == 2 and "SyntaxError" in err.value.diagnostic["message"]
    finally:
        ctx.cleanup()
