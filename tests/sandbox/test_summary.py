"""Summary math against a hand-computed example (KernelBench's fast_p: share of ALL problems)."""

from __future__ import annotations

import pytest

from kernels_env.rules.summary import format_summary, plot, summarize


def r(problem, solution, status, eager=None, compile_=None, comparable=True):
    return {
        "problem": problem,
        "solution": solution,
        "status": status,
        "speedups": {"eager": eager, "compile": compile_} if status == "correct" else {},
        "timings": {"comparable": comparable},
        "reward": 1.0 if status == "correct" else -1.0,
    }


RESULTS = [
    r("A", "A.py", "correct", 2.5, 1.2),
    r("B", "B.py", "correct", 1.2, 0.8),
    r("C", "C.py", "incorrect"),
    r("D", "D__1.py", "correct", 1.6, 1.04),
    r("D", "D__2.py", "compile_error"),
]
PROBLEMS = ["A", "B", "C", "D", "E"]  # E has no solution: a failure


def test_fast_p_hand_computed():
    s = summarize(RESULTS, PROBLEMS)
    assert s["num_problems"] == 5 and s["problems_without_solution"] == ["E"]
    # per problem: mean over its solutions; D counts (1 + 0) / 2
    assert s["fast_p"]["eager"] == pytest.approx({"0": 2.5 / 5, "1": 2.5 / 5, "1.5": 1.5 / 5, "2": 1 / 5})
    assert s["fast_p"]["compile"] == pytest.approx({"0": 2.5 / 5, "1": 1.5 / 5, "1.5": 0.0, "2": 0.0})
    assert s["fast_p_best_of"]["eager"] == pytest.approx({"0": 3 / 5, "1": 3 / 5, "1.5": 2 / 5, "2": 1 / 5})
    # faster = more than 5% faster: compile 1.04x is not, 1.2x is
    assert s["faster_than"]["eager"] == pytest.approx(2.5 / 5)
    assert s["faster_than"]["compile"] == pytest.approx(1 / 5)
    assert s["geomean_speedup"]["eager"] == pytest.approx((2.5 * 1.2 * 1.6) ** (1 / 3))
    assert s["median_speedup"]["eager"] == pytest.approx(1.6)
    assert s["status_counts"] == {"correct": 3, "incorrect": 1, "compile_error": 1}
    text = format_summary(s)
    assert "fast_1.5" in text and "eager" in text and "50.0%" in text


def test_cpu_mode_summary_has_correctness_only(tmp_path):
    results = [
        r("A", "A.py", "correct", comparable=False),
        r("B", "B.py", "runtime_error", comparable=False),
        {**r("C", "C.py", "not_run", comparable=False), "reward": None},
    ]
    s = summarize(results, ["A", "B", "C"])
    assert s["fast_p"]["eager"]["0"] == pytest.approx(1 / 2)  # C is not_run: unverified, left out
    assert s["fast_p"]["eager"]["1"] is None and s["faster_than"]["eager"] is None
    assert s["comparable"] is False and s["mean_reward"] == 0.0
    assert "not comparable" in format_summary(s)
    assert (tmp_path / "p.png").exists() is False
    plot(results, s, str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_speedup_plot(tmp_path):
    s = summarize(RESULTS, PROBLEMS)
    plot(RESULTS, s, str(tmp_path / "s.png"))
    assert (tmp_path / "s.png").stat().st_size > 1000


def test_not_run_results_are_left_out():
    results = [
        r("A", "A.py", "correct", comparable=False),
        {**r("A", "A__cuda.py", "not_run"), "reward": None},
        {**r("B", "B.py", "not_run"), "reward": None},
        r("C", "C.py", "incorrect", comparable=False),
    ]
    s = summarize(results, ["A", "B", "C"])
    assert s["problems_unverified"] == ["B"] and s["num_problems"] == 2
    assert s["fast_p"]["eager"]["0"] == pytest.approx(1 / 2)  # A (its verified solution) correct, C not
    assert s["status_counts"]["not_run"] == 2 and s["num_solutions"] == 4
    assert "not_run:  2" in format_summary(s)


def _sol(problem, status, fraction, comparable=True):
    out = r(problem, f"{problem}.py", status, eager=2.0, comparable=comparable)
    out["timings"]["speed_of_light"] = (
        {"floor_ms": 0.002, "bound": "memory", "fraction": fraction} if comparable else
        {"fraction": None, "reason": "CPU mode: no GPU roofline (timings are not comparable)"}
    )  # fmt: skip
    return out


def test_speed_of_light_fraction_hand_computed():
    """The verdict's record from a known floor and a known time: 8 MB at 4000 GB/s = 2.0 us (memory-bound:
    2**20 FLOPs at 50 TFLOP/s is 0.021 us); a candidate at 2.5 us reaches 2.0 / 2.5 = 80%."""
    from kernels_env.rules.speed_of_light import CPU_REASON, fraction, record
    from kernels_env.tools._roofline import floor

    counts = {"matmul_flops": 0, "other_flops": 2**20, "compulsory_bytes": 8e6, "matmul_dtype": None}
    ceilings = {"source": "measured", "dram_gbps": 4000, "tflops": {"fp32": 50}}
    roof = {"floor": floor(counts, ceilings), "ceilings": ceilings}
    rec = record(roof, 0.0025, "cuda")
    assert rec["floor_ms"] == pytest.approx(0.002) and rec["bound"] == "memory"
    assert rec["fraction"] == pytest.approx(0.8) and rec["ceilings"] == "measured"
    assert fraction(0.002, 0.0) is None and fraction(None, 1.0) is None
    assert record(roof, 0.0025, "cpu") == {"fraction": None, "reason": CPU_REASON}
    assert record({"note": "no GPU"}, 0.0025, "cuda") == {"fraction": None, "reason": "no GPU"}


def test_summary_reports_speed_of_light_over_correct_solutions():
    results = [_sol("a", "correct", 0.8), _sol("b", "correct", 0.5), _sol("c", "correct", 0.2)]
    results.append(_sol("d", "incorrect", 0.9))  # a wrong answer's speed is no speed of light
    sol = summarize(results, ["a", "b", "c", "d"])["speed_of_light"]
    assert sol["count"] == 3 and sol["median"] == pytest.approx(0.5)
    assert sol["geomean"] == pytest.approx((0.8 * 0.5 * 0.2) ** (1 / 3))  # 43.1%
    text = format_summary(summarize(results, ["a", "b", "c", "d"]))
    assert "speed of light: median 50.0%, geomean 43.1% of the roofline floor" in text
    cpu = summarize([_sol("a", "correct", None, comparable=False)], ["a"])
    assert cpu["speed_of_light"]["count"] == 0 and cpu["speed_of_light"]["reason"].startswith("CPU mode")
    assert "speed of light: n/a (CPU mode" in format_summary(cpu)


def test_what_this_machine_cannot_judge_is_counted_apart():
    results = [
        r("A", "A.py", "correct", comparable=False),
        {**r("B", "B.py", "insufficient_memory"), "reward": None},
        {**r("C", "C.py", "toolchain_missing"), "reward": None},
        r("D", "D.py", "compile_error", comparable=False),
    ]
    s = summarize(results, ["A", "B", "C", "D"])
    assert s["candidate_failures"] == 1 and s["num_problems"] == 4
    assert s["no_verdict"]["insufficient_memory"] == {"count": 1, "problems": ["B"]}
    assert s["no_verdict"]["toolchain_missing"] == {"count": 1, "problems": ["C"]}
    assert s["fast_p"]["eager"]["0"] == 0.25  # scored 0 over all problems, as a missing result
    assert "1 insufficient_memory (B), 1 toolchain_missing (C)" in format_summary(s)


def test_verdicts_made_outside_the_judge_are_scored_by_their_status():
    # an agent run: a workspace left without model_new.py is the candidate's failure; a sandbox that did not
    # answer the final evaluation is counted apart, like the judge's own failures
    results = [
        r("A", "A.py", "correct", comparable=False),
        r("B", "B.py", "no_solution", comparable=False),
        {**r("C", "C.py", "infra_error", comparable=False), "reward": None},
    ]
    s = summarize(results, ["A", "B", "C"])
    assert s["candidate_failures"] == 1 and s["mean_reward"] == 0.0  # (1 - 1) / 2: infra_error has none
    assert s["no_verdict"]["infra_error"] == {"count": 1, "problems": ["C"]}
    assert s["fast_p"]["eager"]["0"] == pytest.approx(1 / 3)
    assert "1 infra_error (C)" in format_summary(s) and "candidate failures: 1" in format_summary(s)
