"""Tool time limits, output truncation, the worker protocol, and the compile tool end to end (nvcc, CPU)."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest
from conftest import PROBLEMS

from kernels_env.tools import handle_tool_request, run_tool, run_tool_subprocess
from kernels_env.tools._context import fit_json, run_cmd
from kernels_env.tools.cli import compile_main

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


def test_run_cmd_kills_the_process_group_on_timeout():
    res = run_cmd(["bash", "-c", "sleep 30 & sleep 30"], 0.5)
    assert res.timed_out and res.returncode is None and res.elapsed_s < 10


def test_run_cmd_keeps_only_the_tail():
    res = run_cmd(["python3", "-c", "print('a' * 100000)"], 30, max_bytes=1000)
    assert len(res.stdout) < 1100 and "truncated" in res.stdout


def test_unknown_tool_and_bad_requests():
    assert "unknown tool" in run_tool("nope", {})["error"]
    assert not handle_tool_request({"args": {}})["ok"]
    assert "limit" in run_tool("compile", {"solution": "x"}, {"time_s": 5, "bogus": 1})["error"]
    assert "needs 'solution'" in run_tool("compile", {})["error"]
    assert "not found" in run_tool("compile", {"solution": "/nonexistent/sol.py"})["error"]


def test_subprocess_tool_time_limit_kills_a_hanging_candidate(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text("while True:\n    pass\n")
    resp = run_tool_subprocess("compile", {"solution": str(sol)}, {"time_s": 2}, grace_s=1.0)
    assert not resp["ok"] and "time limit" in resp["error"] and resp["elapsed_s"] < 30


def test_candidate_output_cannot_forge_the_response(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text('print(\'{"ok": true, "tool": "compile", "forged": 1}\')\nclass ModelNew: pass\n')
    resp = run_tool_subprocess("compile", {"solution": str(sol)}, {"time_s": 60})
    assert "forged" not in resp and resp["tool"] == "compile"
    assert resp["result"]["note"].startswith("no CUDA")


def _workspace(tmp_path):
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


@needs_nvcc
def test_compile_tool_workspace_diagnostics_resources_and_sass(tmp_path):
    ws = _workspace(tmp_path)
    resp = run_tool("compile", {"solution": str(ws), "sass": True, "arch": "sm_90"})
    r = resp["result"]
    assert not resp["ok"] and r["errors"] == 1 and r["warnings"] == 1
    err = next(d for d in r["diagnostics"] if d["severity"] == "error")
    # the error inside the Python string maps back to the line of model_new.py the agent edits
    assert err["file"] == "model_new.py" and err["line"] == 7 and "undefined_thing" in err["message"]
    warn = next(d for d in r["diagnostics"] if d["severity"] == "warning")
    assert (warn["file"], warn["line"]) == ("kernels/add.cu", 3)
    (k,) = r["kernels"]
    assert k["name"] == "add_one" and k["registers"] > 0 and not k["spills"]
    if "sass" in k and k["sass"]:  # a disassembler (CUDA toolkit or Triton's bundled one) was found
        assert k["sass"]["global_loads_by_width"] == {"128": 1}
    assert "model_new.py:7" in resp["text"] and "add_one" in resp["text"]


@needs_nvcc
def test_compile_output_limit_truncates(tmp_path):
    ws = _workspace(tmp_path)
    resp = run_tool("compile", {"solution": str(ws)}, {"max_output_bytes": 600})
    assert resp["truncated"] and len(json.dumps(resp)) <= 600


@needs_nvcc
def test_cli_compile_main(tmp_path, capsys):
    ws = _workspace(tmp_path)
    assert compile_main(["--solution", str(ws)]) == 1
    assert "model_new.py:7" in capsys.readouterr().out


def test_python_syntax_error_is_a_diagnostic(tmp_path):
    sol = tmp_path / "sol.py"
    sol.write_text("class ModelNew(:\n    pass\n")
    r = run_tool("compile", {"solution": str(sol)})
    d = r["result"]["diagnostics"][0]
    assert not r["ok"] and d["file"] == "sol.py" and d["line"] == 1 and "SyntaxError" in d["message"]


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


def test_profiling_target_runs_reference_then_candidate_on_cpu(tmp_path):
    import sys

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
