"""The load_inline throughput set (benchmarks.sandbox.load_inline_set), content-addressed load_inline
builds, and the throughput benchmark's CPU smoke mode."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.utils.cpp_extension as ce

from benchmarks.sandbox import load_inline_set
from benchmarks.sandbox._cpu_sampler import CpuSampler
from benchmarks.sandbox.load_inline_throughput import host_cpu, occupancy, parse, steady_state, sustained
from kernels_env.judge.build import cache, hooks

PYBIND_ONLY = """
#include <pybind11/pybind11.h>
static int add(int a, int b) { return a + b; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
"""


def forward_arity(tree: ast.Module, cls: str) -> int:
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    forward = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    return len(forward.args.args) - 1


def test_generated_set_is_deterministic_and_kernelbench_shaped(tmp_path):
    SET = load_inline_set.set_dir(tmp_path / "a")
    again = load_inline_set.set_dir(tmp_path / "b")
    texts = {p.relative_to(SET): p.read_text() for p in SET.rglob("*.py")}
    assert texts == {p.relative_to(again): p.read_text() for p in again.rglob("*.py")}  # same every time
    solutions = sorted((SET / "solutions").glob("*.py"))
    assert len(solutions) >= 30
    cuda_sources = set()
    for sol in solutions:
        tree = ast.parse(sol.read_text())
        problem = ast.parse((SET / "problems" / sol.name).read_text())
        assert forward_arity(tree, "ModelNew") == forward_arity(problem, "Model"), sol.name
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        call = next(n for n in calls if getattr(n.func, "id", "") == "load_inline")
        assert {k.arg for k in call.keywords} >= {"name", "cpp_sources", "cuda_sources", "functions"}
        cuda = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                    and n.targets[0].id == "cuda_source")  # fmt: skip
        assert "#include <torch/extension.h>" in cuda and "__global__" in cuda
        cuda_sources.add(cuda)
    assert len(cuda_sources) == len(solutions)  # every build is a real one


def test_extension_key_ignores_the_name_unless_the_source_spells_it():
    key_a, keep_a = hooks.extension_key("first", "decl;", "kernel", {"functions": ["f"]})
    key_b, keep_b = hooks.extension_key("second", "decl;", "kernel", {"functions": ["f"]})
    assert key_a == key_b and not keep_a and not keep_b
    assert hooks.extension_key("first", "decl;", "kernel2", {"functions": ["f"]})[0] != key_a
    assert hooks.extension_key("first", "decl;", "kernel", {"functions": ["g"]})[0] != key_a
    hard = "PYBIND11_MODULE(my_ext, m) {}"
    key_c, keep_c = hooks.extension_key("my_ext", hard, None, {})
    assert keep_c and hooks.extension_key("other", hard, None, {})[0] != key_c


def test_identical_extensions_share_one_build(tmp_path, monkeypatch):
    """Two load_inline calls with the same source under different names: one compiler run, one .so."""
    monkeypatch.setenv(cache.SANDBOX_CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(ce, "load_inline", ce.load_inline)  # restored after the test
    hooks.content_keyed_extensions()
    hooks.content_keyed_extensions()  # idempotent: wrapping twice would key the keyed name again
    first = ce.load_inline(name="first_name", cpp_sources=PYBIND_ONLY, no_implicit_headers=True)
    second = ce.load_inline(name="second_name", cpp_sources=PYBIND_ONLY, no_implicit_headers=True)
    assert first.add(2, 3) == 5 and second.add(4, 5) == 9
    assert first.__file__ == second.__file__
    built = list((tmp_path / "torch_extensions" / "content").iterdir())
    assert len(built) == 1 and len(list(built[0].glob("*.so"))) == 1


@pytest.mark.toolchain  # two load_inline builds: minutes on 2 cores
def test_throughput_smoke_mode(tmp_path):
    out = tmp_path / "smoke.json"
    cmd = [sys.executable, "-m", "benchmarks.sandbox.load_inline_throughput", "--smoke", "--out", str(out)]
    env = {**os.environ, "BENCHMARKS_CACHE_DIR": str(tmp_path / "cache")}  # the set is generated there
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=3000, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["candidates"] == 2 and result["statuses"] == {"not_run": 2}
    phases = {"queued", "compile", "run", "gpu_wait", "gpu_exclusive", "baselines", "total"}
    assert set(result["phases"]) == phases
    assert result["run_workers_per_gpu"] == 1 and result["timing_lock"] is False
    assert result["date"] and result["versions"]["torch"]
    assert result["build_paths"]["headers"] == {"lean": 2}  # KernelBench-style sources build lean
    # the renamed copy of the first solution finds its build: far less than a cold build
    assert result["reuse"]["status"] == "not_run"
    assert result["reuse"]["compile_s"] < result["reuse"]["first_compile_s"] / 3


def test_throughput_budget_writes_a_truncated_report(tmp_path):
    """A run cut by --budget-s (or SIGTERM) still writes the report of the verdicts that landed."""
    out = tmp_path / "cut.json"
    cmd = [sys.executable, "-m", "benchmarks.sandbox.load_inline_throughput", "--smoke", "--budget-s", "0.01"]
    env = {**os.environ, "BENCHMARKS_CACHE_DIR": str(tmp_path / "cache")}  # the set is generated there
    run = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 3, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["truncated"] and result["stopped_by"] == "budget" and result["reuse"] is None
    assert result["submitted"] == 2 and result["candidates"] < 2


def test_run_worker_occupancy_adds_runs_and_baselines():
    results = [{"durations_s": {"run": 2.0}}, {"durations_s": {"run": None}}, {"durations_s": {"run": 1.0}}]
    occ = occupancy(results, wall=10.0, baseline_s=[3.0, 4.0], run_workers=1)
    assert occ["candidate_run_s"] == 3.0 and occ["baselines_s"] == 7.0 and occ["baselines_measured"] == 2
    assert occ["busy_share"] == 1.0 and occ["baseline_median_s"] == 3.5
    # N run workers: the same work is a share of N workers' time; their waits for the GPU lock are counted
    results[0]["durations_s"]["gpu_wait"] = 0.5
    two = occupancy(results, wall=10.0, baseline_s=[3.0, 4.0], run_workers=2, baseline_wait=[0.25])
    assert two["busy_share"] == 0.5 and two["workers"] == 2 and two["gpu_wait_s"] == 0.75


def test_steady_state_rate_leaves_the_first_wave_out():
    rate = steady_state({"a": 70.0, "b": 74.0, "c": 78.0, "d": 106.0})
    assert rate["first_verdict_s"] == 70.0 and rate["verdicts_after_first"] == 3 and rate["per_hour"] == 300.0
    assert steady_state({"a": 5.0})["per_hour"] is None and steady_state({})["first_verdict_s"] is None
    args = parse(["--run-workers-per-gpu", "3", "--no-exclusive-timing"])
    assert args.run_workers_per_gpu == 3 and args.no_exclusive_timing


def test_cpu_sampler_sees_a_busy_core_and_host_cpu_divides_it_per_verdict():
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat")
    with CpuSampler(interval_s=0.1) as cpu:
        end = time.perf_counter() + 1.5
        while time.perf_counter() < end:  # one core busy for 1.5 s
            pass
    whole = cpu.summary()
    assert whole["cores"] >= 1 and 0.0 < whole["busy_share"] <= 1.0
    assert whole["busy_core_s"] >= 1.0  # this thread's 1.5 s, less the sampling granularity
    assert cpu.summary(10.0, 20.0) is None  # no samples in that window
    steady = {"first_verdict_s": 0.0, "last_verdict_s": 100.0, "verdicts_after_first": 2}
    report = host_cpu(cpu, steady, verdicts=4)
    assert report["run"] == whole and report["core_s_per_verdict"] == round(whole["busy_core_s"] / 2, 1)
    assert report["run_core_s_per_verdict"] == round(whole["busy_core_s"] / 4, 1)
    assert 0.0 <= whole["steal_share"] < 1.0 and report["host"]["logical_cpus"] >= 1
    assert host_cpu(cpu, {"first_verdict_s": None})["core_s_per_verdict"] is None


def test_sustained_rate_runs_from_the_first_wave_to_the_last_build_start():
    # two workers: verdicts at 10, 11 (first wave), 20, 30, 40; the last build starts at 31 (40 - 9 + 0)
    waves = ((10, 0), (11, 0), (20, 1), (30, 2), (40, 0))
    rows = [{"arrived_s": t, "total": 9.0, "queued": q} for t, q in waves]
    rate = sustained(rows, workers=2)
    assert rate["from_s"] == 11 and rate["to_s"] == 31.0 and rate["verdicts"] == 2  # 20 and 30
    assert rate["per_hour"] == 360.0  # 2 verdicts in 20 s
    assert sustained(rows[:2], workers=2)["per_hour"] is None
