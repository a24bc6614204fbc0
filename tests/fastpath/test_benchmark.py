"""The throughput benchmark's problem set, its two solution sets, and its bookkeeping (no GPU needed)."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchmarks.sandbox import load_inline_variants
from benchmarks.sandbox import sandbox_throughput as bench

from .support import REPO

TASKS = bench.list_tasks()


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cuda_src(path) -> str:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CUDA_SRC":
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} has no CUDA_SRC")


def test_problem_set_is_kernelbench_shaped():
    assert len(TASKS) >= 10
    kinds = " ".join(TASKS)
    assert "matmul" in kinds and "conv" in kinds and "softmax" in kinds and "norm" in kinds
    for task in TASKS:
        ref = _load(bench.problem_path(task), f"t_{task}")
        assert callable(ref.get_inputs) and callable(ref.get_init_inputs)
        model = ref.Model(*ref.get_init_inputs())
        new_src = (bench.FASTPATH / f"{task}.py").read_text()
        new_init = ast.parse(new_src)
        (cls,) = [n for n in new_init.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
        init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
        ref_params = list(inspect.signature(ref.Model.__init__).parameters)
        assert [a.arg for a in init.args.args] == ref_params, task
        assert isinstance(model, ref.Model)


def _without(sizes: dict, source: str) -> list[str]:
    return [line for line in source.splitlines() if line.split(" = ")[0] not in sizes]


def test_example_problems_are_read_at_the_benchmark_size():
    from benchmarks.sandbox._throughput.problems import EXAMPLES, FROM_EXAMPLES
    from benchmarks.sandbox._throughput.problems import TASKS as OWN

    assert set(FROM_EXAMPLES) <= set(TASKS)
    for task, (example, sizes) in FROM_EXAMPLES.items():
        assert not (OWN / f"{task}.py").exists(), "one copy: the example problem"
        text, small = bench.problem_path(task).read_text(), (EXAMPLES / example).read_text()
        assert _without(sizes, text) == _without(sizes, small) and text != small
        ref = _load(bench.problem_path(task), f"sized_{task}")
        assert {name: getattr(ref, name) for name in sizes} == sizes


def test_both_solution_sets_run_the_same_cuda_source(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCHMARKS_CACHE_DIR", str(tmp_path / "cache"))
    variants = load_inline_variants.variants_dir()  # generated into the (test's) cache on first use
    assert variants.parent == tmp_path / "cache" and load_inline_variants.variants_dir() == variants
    for task in TASKS:
        fp = bench.FASTPATH / f"{task}.py"
        li = bench.solution_path("load_inline", task)
        fast = bench.solution_path("load_inline_fast", task)
        assert li == variants / "load_inline" / f"{task}.py"
        assert _cuda_src(fp) == _cuda_src(li) == _cuda_src(fast), task
        assert "load_inline(" in li.read_text() and " cuda_library(" not in li.read_text()
        assert "use_pch=True" in fast.read_text()
    again = load_inline_variants.variants_dir(tmp_path / "again")  # deterministic: the same files again
    assert {p.relative_to(again): p.read_text() for p in again.rglob("*.py")} == {
        p.relative_to(variants): p.read_text() for p in variants.rglob("*.py")
    }


@pytest.mark.slow  # ~12 nvcc builds: run with -m slow (make test-all) before spending GPU time
def test_every_fastpath_solution_builds(fp_cache, build_only):
    from kernels_env.fastpath import find_cuda_library

    def build(task):
        if "matmul" in task and find_cuda_library("cublas") is None:
            return task, None  # this machine has no cuBLAS headers; the GPU run builds it
        module = _load(bench.FASTPATH / f"{task}.py", f"fp_{task}")
        return task, module._lib

    with ThreadPoolExecutor(max_workers=4) as pool:
        libs = dict(pool.map(build, TASKS))
    for task, lib in libs.items():
        if lib is None:
            continue
        assert lib.functions and not [d for d in lib.diagnostics if d["severity"] == "error"], task
        assert all(r.spill_stores_bytes == 0 for r in lib.resource_usage), task


def test_stats_and_spreads():
    s = bench.stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median"] == 3.0 and s["min"] == 1.0 and s["count"] == 5
    assert s["iqr"] == pytest.approx(2.0) and s["spread"] == pytest.approx(2.0 / 3.0)
    assert bench.stats([]) == {"count": 0}
    timings = {
        "candidate": {"median_ms": 0.5, "iqr_ms": 0.005, "count": 100},
        "baselines": {"eager": {"median_us": 50.0, "iqr_us": 5.0}, "note": "x"},
        "junk": [1, 2],
    }
    found = {f["where"]: f for f in bench.find_spreads(timings)}
    assert found["timings.candidate"]["spread"] == pytest.approx(0.01)
    assert found["timings.candidate"]["median_ms"] == 0.5
    assert found["timings.baselines.eager"]["median_ms"] == pytest.approx(0.05)
    assert bench.find_spreads(None) == []


def test_candidates_are_unique_sources(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = bench.make_candidate(TASKS[0], "n1", tmp_path / "a")
    b = bench.make_candidate(TASKS[0], "n2", tmp_path / "b")
    assert _cuda_src(a) != _cuda_src(b) and "// candidate n1" in _cuda_src(a)
    assert _cuda_src(a).replace("\n// candidate n1", "") == _cuda_src(bench.FASTPATH / a.name)


def test_report_from_parts(tmp_path):
    """The report merges whatever steps finished and renders targets; a missing step is marked, not fatal."""
    compile_part = {
        "tasks": ["01_relu", "10_matmul"],
        "concurrency": 8,
        "fastpath_solo": [
            {"task": "01_relu", "compile_s": 0.5, "correct": True},
            {"task": "10_matmul", "compile_s": 0.7, "correct": True},
        ],
        "fastpath_concurrent": [
            {"task": "01_relu", "compile_s": 0.6},
            {"task": "10_matmul", "compile_s": 0.8},
        ],
        "load_inline_concurrent": [
            {"task": "01_relu", "compile_s": 50.0, "correct": True},
            {"task": "10_matmul", "compile_s": None, "error": "boom"},
        ],
    }
    (tmp_path / "compile.json").write_text(json.dumps(bench.summarize_compile(compile_part)))
    e2e = bench.summarize_e2e(
        {
            "available": True,
            "sequential": [
                {
                    "task": "01_relu",
                    "seconds": 2.0,
                    "status": "correct",
                    "spreads": [{"median_ms": 0.5, "spread": 0.01}],
                },
                {"task": "01_relu", "seconds": 4.0, "status": "correct", "spreads": []},
            ],
            "sequential_wall_s": 6.0,
        }
    )
    (tmp_path / "e2e.json").write_text(json.dumps(e2e))
    results = bench.step_report(argparse.Namespace(from_file=None, parts=str(tmp_path)))
    h = results["headline"]
    assert h["compile_speedup"] == pytest.approx(50.0 / 0.6) and h["compile_target_met"] is True
    assert h["candidates_per_hour_per_gpu"] == pytest.approx(1200.0) and h["throughput_target_met"]
    assert h["spread_max_sandbox"] == pytest.approx(0.01) and h["spread_target_met"]
    assert results["spread"] == {"error": "step did not finish"}
    md = results["markdown"]
    assert "| 01_relu |" in md and ">= 20x" in md and "83.3x" in md
    assert results["environment"]["date"] and "python" in results["environment"]
    failed = bench.summarize_e2e(
        {
            "available": True,
            "sequential": [{"task": "01_relu", "seconds": 0.0, "status": "benchmark_error"}] * 50
            + [{"task": "01_relu", "seconds": 1.0, "status": "incorrect"}],
            "sequential_wall_s": 1.0,
        }
    )
    assert failed["summary"]["candidates_per_hour"] is None, "failed evaluations must not count as throughput"
    rerendered = bench.markdown(results)
    assert rerendered == md
    bench.plot(results, str(tmp_path / "compile.png"))
    assert (tmp_path / "compile.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_compile_step_without_gpu(tmp_path, fp_cache, monkeypatch):
    monkeypatch.setenv("BENCHMARKS_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "compile.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.sandbox.sandbox_throughput",
            "compile",
            "--tasks",
            "01_relu",
            "--skip-load-inline",
            "--concurrency",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]

    data = json.loads(out.read_text())
    (solo,) = data["fastpath_solo"]
    assert solo["task"] == "01_relu" and solo["compile_s"] > 0 and not solo.get("error")
    assert solo["builds"][0]["cache_hit"] is False
    assert data["summary"]["fastpath_concurrent"]["count"] == 1


def test_judge_phase_plot_groups_and_medians(tmp_path):
    from benchmarks.sandbox import plot_judge_phases as phases

    assert phases.main([]) == 2 and phases.main([str(tmp_path / "none.json"), "x.png"]) == 2  # one line each

    assert [phases.group(p) for p in ("trial 2/5", "input family zeros", "timing the candidate")] == [
        "trials",
        "input families",
        "timing",
    ]
    assert phases.group("re-checks") == "after timing" and phases.group("cleanup") == "load + cleanup"
    recs = [
        {"durations": {"compile": c, "run_phases": {"trial 1/5": 0.5, "trial 2/5": t, "re-checks": 0.1}}}
        for c, t in ((1.0, 0.1), (2.0, 0.3), (3.0, 0.2))
    ]
    m = phases.medians(recs)
    assert m["compile"] == 2.0 and m["trials"] == pytest.approx(0.7) and m["after timing"] == 0.1
    doc = tmp_path / "phases.json"
    doc.write_text(
        json.dumps(
            {"gpu": "test", "policy": "strict", "before": {"records": recs}, "after": {"records": recs[:1]}}
        )
    )
    assert phases.main([str(doc), str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 1000
