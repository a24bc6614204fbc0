"""Table 1 for batch and agent result sets: per level, full and audited subsets, labels; every number against
a direct computation from the result records."""

from __future__ import annotations

import json
import math

import pytest

from research.evaluation import format_table1_report, load_results, read_audit, table1_report

H200 = {"device": "cuda", "gpu": "NVIDIA H200", "torch": "2.11.0+cu130"}
JUDGE = {
    "protocol": "cuda_agent",
    "policy": "cuda_agent",
    "allow_tf32": True,
    "tolerances": {"float32": [0.01, 0.01]},
}


def _verdict(problem, status, eager=None, compile_=None, autotune=None, env=H200, judge=JUDGE):
    return {
        "problem": problem,
        "solution": f"{problem}.py",
        "status": status,
        "reward": 3.0 if status == "correct" else -1.0,
        "timings": {"comparable": True},
        "speedups": {"eager": eager, "compile": compile_, "max-autotune": autotune},
        "environment": env,
        "judge": judge,
    }


# level 1: 4 tasks, level 2: 2 tasks
BATCH = [
    {**_verdict("1_a", "correct", 2.0, 1.5, 1.2), "level": 1},
    {**_verdict("2_b", "correct", 1.04, 0.5, 0.4), "level": 1},  # not >5% faster than eager
    {**_verdict("3_c", "incorrect"), "level": 1},
    {**_verdict("4_d", "correct", 4.0, 2.0, 1.0), "level": 1},
    {**_verdict("1_e", "correct", 3.0, 3.0, 3.0), "level": 2},
    {**_verdict("2_f", "rejected"), "level": 2},
]


def _gm(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def test_batch_table_per_level():
    t = table1_report(BATCH)["full"]
    l1, l2, ov = t["levels"]["1"], t["levels"]["2"], t["overall"]
    assert l1["tasks"] == 4 and l1["pass_rate"] == 3 / 4
    assert l1["faster_than_eager"] == 2 / 4 and l1["faster_than_compile"] == 2 / 4
    assert l1["faster_than_max-autotune"] == 1 / 4
    assert l1["geomean_vs_eager"] == pytest.approx(_gm([2.0, 1.04, 4.0]))
    assert l1["geomean_vs_compile"] == pytest.approx(_gm([1.5, 0.5, 2.0]))
    assert l2["pass_rate"] == 0.5 and l2["faster_than_compile"] == 0.5
    assert ov["pass_rate"] == 4 / 6 and ov["faster_than_eager"] == 3 / 6
    assert ov["geomean_vs_eager"] == pytest.approx(_gm([2.0, 1.04, 4.0, 3.0]))


def test_labels_come_from_the_verdicts_and_mixing_is_flagged():
    rep = table1_report(BATCH)
    assert rep["labels"] == {
        "gpu": "NVIDIA H200",
        "torch": "2.11.0+cu130",
        "protocol": "cuda_agent",
        "policy": "cuda_agent",
        "precision": "tf32 on, fp32 atol=rtol=0.01",
        "mixed": [],
    }
    mixed = BATCH + [
        {**_verdict("5_g", "correct", 1.0, 1.0, 1.0, env={**H200, "gpu": "NVIDIA H100"}), "level": 1}
    ]
    rep = table1_report(mixed)
    assert rep["labels"]["mixed"] == ["gpu"] and rep["labels"]["gpu"] == "NVIDIA H200 | NVIDIA H100"
    assert "WARNING: mixed gpu" in format_table1_report(rep)


def _audit(tmp_path, jsonl=False):
    reports = [
        {
            "problem": "level1/3_c.py",
            "status": "flagged",
            "flags": [{"kind": "zeros_pass", "reason": "r", "tolerance": 0.01}],
        },
        {
            "problem": "level1/4_d.py",
            "status": "flagged",
            "flags": [
                {"kind": "zeros_pass", "reason": "r", "tolerance": 0.01},
                {"kind": "constant_pass", "reason": "r", "tolerance": 0.0001},
            ],
        },
        {
            "problem": "level2/1_e.py",
            "status": "flagged",
            "flags": [{"kind": "constant", "reason": "r", "tolerance": None}],
        },
        {"problem": "level1/1_a.py", "status": "ok", "flags": []},
        {
            "problem": "level1/2_b.py",
            "status": "flagged",
            "flags": [{"kind": "nearly_constant", "reason": "r", "tolerance": 0.1}],
        },  # looser than the judge's
    ]
    path = tmp_path / ("audit.jsonl" if jsonl else "audit.json")
    if jsonl:
        path.write_text("".join(json.dumps(r) + "\n" for r in reports))
    else:
        path.write_text(json.dumps({"tolerances": [1e-4, 1e-2], "device": "cpu", "problems": reports}))
    return read_audit(path)


@pytest.mark.parametrize("jsonl", [False, True])
def test_audited_subset_leaves_out_what_the_audit_flags_at_the_judges_tolerance(tmp_path, jsonl):
    rep = table1_report(BATCH, _audit(tmp_path, jsonl))
    assert rep["audit"]["tolerance"] == 0.01
    assert rep["audit"]["excluded"] == {
        "level1/3_c": ["zeros_pass@0.01"],
        "level1/4_d": ["zeros_pass@0.01", "constant_pass@0.0001"],
        "level2/1_e": ["constant"],
    }
    assert rep["audit"]["not_in_audit"] == ["level2/2_f"]
    a = rep["audited"]
    assert a["levels"]["1"]["tasks"] == 2 and a["levels"]["1"]["pass_rate"] == 1.0
    assert a["levels"]["1"]["faster_than_eager"] == 0.5
    assert a["levels"]["1"]["geomean_vs_eager"] == pytest.approx(_gm([2.0, 1.04]))
    assert a["levels"]["2"]["pass_rate"] == 0.0 and a["overall"]["tasks"] == 3
    # at the kernelbench tolerance (1e-4) only the 1e-4 flag and the tolerance-free one count
    strict = [{**r, "judge": {**JUDGE, "tolerances": {"float32": [1e-4, 1e-4]}}} for r in BATCH]
    assert set(table1_report(strict, _audit(tmp_path, jsonl))["audit"]["excluded"]) == {
        "level1/4_d",
        "level2/1_e",
    }


def test_agent_results_take_labels_from_their_trajectories(tmp_path):
    results = [
        {
            "task": "level1/1_a",
            "level": "1",
            "problem": "1_a",
            "status": "correct",
            "reward": 3.0,
            "speedups": {"eager": 2.0, "compile": 1.5},
            "comparable": True,
            "end_reason": "submitted",
            "turns": 3,
        },
        {
            "task": "level1/2_b",
            "level": "1",
            "problem": "2_b",
            "status": "incorrect",
            "reward": -1.0,
            "speedups": {},
            "comparable": True,
            "end_reason": "max_turns",
            "turns": 5,
        },
        {
            "task": "level2/1_e",
            "level": "2",
            "problem": "1_e",
            "status": "correct",
            "reward": 2.0,
            "speedups": {"eager": 1.5, "compile": 0.9},
            "comparable": True,
            "end_reason": "submitted",
            "turns": 2,
        },
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results) + '{"torn"')
    traj = [{"task": r["task"], "verdict": {"environment": H200, "judge": JUDGE}} for r in results]
    (tmp_path / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traj))
    rep = table1_report(load_results(tmp_path))
    assert rep["kind"] == "agent" and rep["labels"]["gpu"] == "NVIDIA H200"
    ov = rep["full"]["overall"]
    assert ov["tasks"] == 3 and ov["pass_rate"] == 2 / 3 and ov["faster_than_compile"] == 1 / 3
    assert ov["geomean_vs_compile"] == pytest.approx(_gm([1.5, 0.9]))
    assert ov["end_reasons"] == {"max_turns": 1, "submitted": 2}
    assert rep["full"]["levels"]["2"]["faster_than_eager"] == 1.0


def test_batch_results_file_without_levels(tmp_path):
    (tmp_path / "r.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "level"}) + "\n" for r in BATCH)
    )
    rep = table1_report(load_results(tmp_path / "r.jsonl", level=1))
    assert list(rep["full"]["levels"]) == ["1"] and rep["full"]["overall"]["pass_rate"] == 4 / 6
    assert "L1" in format_table1_report(rep)
    with pytest.raises(FileNotFoundError, match="no results file"):
        load_results(tmp_path / "missing")


def test_tasks_without_a_result_count_as_failed():
    tasks = [(1, "1_a"), (1, "2_b"), (1, "3_c"), (1, "4_d"), (1, "5_x"), (2, "1_e"), (2, "2_f"), (2, "3_y")]
    rep = table1_report(BATCH, tasks=tasks)["full"]
    assert rep["levels"]["1"]["tasks"] == 5 and rep["levels"]["1"]["pass_rate"] == 3 / 5
    assert rep["levels"]["1"]["faster_than_eager"] == 2 / 5
    assert rep["levels"]["2"]["pass_rate"] == 1 / 3 and rep["overall"]["pass_rate"] == 4 / 8
    assert rep["overall"]["status_counts"]["no_solution"] == 2
    # geomeans stay over correct solutions only
    assert rep["levels"]["1"]["geomean_vs_eager"] == pytest.approx(_gm([2.0, 1.04, 4.0]))


def test_table1_reports_speed_of_light_next_to_speedups():
    """Median and geomean achieved fraction of the roofline floor per level, over correct solutions."""
    rows = []
    for problem, status, frac in (
        ("1_a", "correct", 0.9),
        ("2_b", "correct", 0.4),
        ("3_c", "incorrect", 0.99),
    ):
        v = _verdict(problem, status, eager=1.5, compile_=1.2)
        v["timings"]["speed_of_light"] = {"floor_ms": 0.01, "bound": "memory", "fraction": frac}
        rows.append(v)
    report = table1_report(rows, modes=("eager", "compile"))
    overall = report["full"]["overall"]
    assert overall["speed_of_light_median"] == pytest.approx(0.65)
    assert overall["speed_of_light_geomean"] == pytest.approx(math.sqrt(0.9 * 0.4))  # 60.0%
    text = format_table1_report(report)
    assert "SoL med" in text and "65.0%" in text and "60.0%" in text
