"""The sandbox benchmarks no other test runs (guard_overhead, judge_profile, pch_builds, profile_prestart,
tool_latency): each one's CPU path run in-process with tiny sizes, or, where it needs a GPU or minutes of
builds, its refusal without one and its pure helpers against hand-computed values. Results go to tmp_path."""

from __future__ import annotations

import json
import tempfile

import pytest

RELU_PROBLEM = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(4, 256) * 2 - 1]


def get_init_inputs():
    return []
"""

# A Triton ReLU: on a CPU it runs under TRITON_INTERPRET=1 and counts as a custom kernel for the guard.
TRITON_RELU = """
import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
"""


def _relu_dirs(tmp_path):
    tasks, sols = tmp_path / "tasks", tmp_path / "solutions"
    tasks.mkdir()
    sols.mkdir()
    (tasks / "01_relu.py").write_text(RELU_PROBLEM)
    (sols / "01_relu.py").write_text(TRITON_RELU)
    return tasks, sols


def _one_line(capsys, prefix: str) -> str:
    out = capsys.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix) and "Traceback" not in out.err, lines
    return lines[0]


def _no_gpu() -> bool:
    from kernels_env.runtime.devices import visible_gpus

    return not visible_gpus()


def test_guard_overhead_cpu_run(tmp_path, monkeypatch):
    from benchmarks.sandbox import guard_overhead as bench

    monkeypatch.setenv("KERNELS_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # main sets it by setdefault; restored after the test
    tasks, sols = _relu_dirs(tmp_path)
    out = tmp_path / "guard.json"
    argv = ["--device", "cpu", "--tasks", "01_relu", "--calls", "2", "--out", str(out)]
    assert bench.main(argv + ["--tasks-dir", str(tasks), "--solutions-dir", str(sols)]) == 0
    doc = json.loads(out.read_text())
    assert doc["device"] == "cpu" and doc["calls"] == 2 and doc["policy"] == "cuda_agent" and "run" in doc
    (rec,) = doc["results"]
    assert rec["task"] == "01_relu" and "error" not in rec and rec["plain_s"] > 0
    assert set(rec["guarded_s"]) == set(bench.VARIANTS) and all(v > 0 for v in rec["guarded_s"].values())
    parts = {"profiler_around_plain_call", "integrity_check", "global_state_capture", "thread_snapshot"}
    assert set(rec["parts_s"]) == parts and all(v > 0 for v in rec["parts_s"].values())


def test_guard_overhead_refuses_what_cannot_run(tmp_path, capsys):
    from benchmarks.sandbox import guard_overhead as bench

    out = tmp_path / "guard.json"
    assert bench.main(["--device", "cpu", "--tasks", "01_relu", "--out", str(out)]) == 2
    assert "--solutions-dir" in _one_line(capsys, "guard_overhead: the fast-path solutions need a CUDA")
    if _no_gpu():
        assert bench.main(["--device", "cuda", "--out", str(out)]) == 2
        _one_line(capsys, "guard_overhead: --device cuda, but no CUDA device is visible")
    assert not out.exists()


@pytest.mark.slow  # a CPU SandboxClient start and one judged candidate: ~10 s
def test_judge_profile_cpu_run(tmp_path, monkeypatch, capsys):
    from benchmarks.sandbox import judge_profile as bench

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its work dir (profiles, sandbox cache)
    monkeypatch.setenv("KERNELS_ENV_PROFILE_DIR", "")  # main sets it for the workers; restored after
    tasks, sols = _relu_dirs(tmp_path)
    argv = ["--device", "cpu", "--tasks", "01_relu", "--repeat", "2", "--top", "5"]
    assert bench.main(argv + ["--tasks-dir", str(tasks), "--solutions-dir", str(sols)]) == 0
    out = capsys.readouterr().out
    assert "01_relu #0: correct" in out and "01_relu #1: correct" in out, out[:2000]
    assert all(f"===== 2 evaluate requests, by {key}" in out for key in ("cumulative", "tottime"))
    assert len(list(tmp_path.glob("judge_profile_*/prof/evaluate-*.prof"))) == 2


def test_judge_profile_refuses_fastpath_on_cpu(capsys):
    from benchmarks.sandbox import judge_profile as bench

    assert bench.main(["--device", "cpu", "--tasks", "01_relu"]) == 2
    _one_line(capsys, "judge_profile: the fast-path solutions need a CUDA device")


def test_pch_builds_summary():
    from benchmarks.sandbox import pch_builds as bench

    cold = [{"solution": "a", "seconds": 30.0}, {"solution": "b", "seconds": 10.0}]
    cold.append({"solution": "c", "error": "x"})
    pch = [{"solution": s, "seconds": t} for s, t in (("a", 50.0), ("b", 4.0), ("c", 6.0))]
    assert bench.summary(cold, pch) == {
        "cold_median_s": 20.0,  # median of 30 and 10 (c failed)
        "pch_first_s": 50.0,
        "pch_next_median_s": 5.0,  # median of 4 and 6
        "errors": ["c"],
    }
    failed = [{"solution": "a", "error": "x"}]
    assert bench.summary(failed, failed) == {
        "cold_median_s": None,
        "pch_first_s": None,
        "pch_next_median_s": None,
        "errors": ["a", "a"],
    }


def test_pch_builds_unknown_solution_is_one_line(tmp_path, monkeypatch, capsys):
    from benchmarks.sandbox import pch_builds as bench

    monkeypatch.setenv("BENCHMARKS_CACHE_DIR", str(tmp_path / "bench_cache"))  # the set is generated here
    out = tmp_path / "pch.json"
    assert bench.main(["--solutions", "01_relu,no_such_kernel", "--json", str(out)]) == 2
    _one_line(capsys, "pch_builds: no such solution in the load_inline set: no_such_kernel")
    assert not out.exists()


def test_profile_prestart_medians():
    from benchmarks.sandbox import profile_prestart as bench

    cold = [{"wall_s": w, "prestarted": False} for w in (4.0, 3.0, 5.0)]
    warm = [{"wall_s": 9.0, "prestarted": False}, {"wall_s": 2.0, "prestarted": True}]
    warm.append({"wall_s": 1.0, "prestarted": True})
    assert bench.medians({"cold": cold, "prestarted": warm}) == {"cold": 4.0, "prestarted": 1.5}
    # --calls 1: the one pre-started call is cold by construction (no median, it used to raise)
    assert bench.medians({"cold": cold[:1], "prestarted": warm[:1]}) == {"cold": 4.0, "prestarted": None}


def test_profile_prestart_rejects_no_calls(capsys):
    from benchmarks.sandbox import profile_prestart as bench

    with pytest.raises(SystemExit) as exc:
        bench.main(["--calls", "0"])
    assert exc.value.code == 2 and "--calls must be at least 1" in capsys.readouterr().err


@pytest.mark.slow  # four profiled processes, each importing torch: ~20 s
def test_profile_prestart_cpu_run(tmp_path, monkeypatch):
    from benchmarks.sandbox import profile_prestart as bench
    from kernels_env.tools._prestart import ENABLE_ENV

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its candidate file
    monkeypatch.setenv(ENABLE_ENV, "0")  # main sets it per path; restored after the test
    out = tmp_path / "prestart.json"
    assert bench.main(["--calls", "2", "--think-s", "0.5", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [len(doc["runs"][p]) for p in ("cold", "prestarted")] == [2, 2] and "run" in doc
    assert not any(r["prestarted"] for r in doc["runs"]["cold"])
    assert not doc["runs"]["prestarted"][0]["prestarted"]  # cold by construction
    assert all(r["wall_s"] > 0 and r["stages_s"]["forward"] > 0 for p in doc["runs"].values() for r in p)
    med = doc["summary"]["median_s"]
    assert med["cold"] > 0 and (med["prestarted"] is None or med["prestarted"] > 0)


def test_tool_latency_refuses_without_gpu(tmp_path, capsys):
    from benchmarks.sandbox import tool_latency as bench

    if not _no_gpu():
        pytest.skip("the refusal is for a machine without a GPU")
    out = tmp_path / "tool_latency.json"
    assert bench.main(["--out", str(out), "--cache-dir", str(tmp_path / "cache")]) == 2
    _one_line(capsys, "tool_latency: needs a CUDA GPU")
    assert not out.exists()
