"""Per-task paired results: rows from verdicts, the results file, pairing, the headline and the ablation
table (numbers checked against stats' references and hand counts)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from research.evaluation import stats
from research.evaluation.paired import (
    ResultsError,
    RunResults,
    TaskResult,
    ablation_table,
    check_run,
    compare,
    pair_runs,
    report,
    result_from_verdict,
)
from research.evaluation.protocol import Protocol, ProtocolConfig


def test_result_from_verdict_uses_the_sandbox_rule():
    fast = {"status": "correct", "speedups": {"eager": 1.3, "compile": 1.02}, "timings": {"comparable": True}}
    r = result_from_verdict("t1", 0, fast)
    assert r.passed and r.faster_than_eager and not r.faster_than_compile  # 1.02x is not >5% faster
    assert (r.speedup_vs_eager, r.speedup_vs_compile) == (1.3, 1.02)
    bad = result_from_verdict("t1", 0, {"status": "incorrect", "speedups": {"eager": 3.0}})
    assert not bad.passed and bad.faster_than_eager is False and bad.speedup_vs_eager is None
    cpu = result_from_verdict(
        "t1", 0, {"status": "correct", "speedups": {}, "timings": {"comparable": False}}
    )
    assert cpu.passed and cpu.faster_than_compile is None
    no_compile = result_from_verdict(
        "t1", 0, {"status": "correct", "speedups": {"eager": 2.0}, "timings": {"comparable": True}}
    )
    assert no_compile.faster_than_eager and no_compile.faster_than_compile is False


def _run(name, passes, faster, speed=None, seeds=(0,), split="test_seen"):
    """passes/faster: (n_tasks, n_seeds) 0/1; speed: speedup vs compile of passing rows."""
    rows = []
    for i, (p_row, f_row) in enumerate(zip(passes, faster)):
        for j, s in enumerate(seeds):
            ok = bool(p_row[j])
            sp = None if not ok else (speed[i][j] if speed is not None else 1.0)
            rows.append(
                TaskResult(
                    f"t{i:03d}",
                    s,
                    "correct" if ok else "incorrect",
                    ok,
                    ok and bool(f_row[j]),
                    ok and bool(f_row[j]),
                    sp,
                    sp,
                )
            )
    return RunResults(name, split, rows, "abc")


def test_results_file_roundtrip_and_grid_errors(tmp_path):
    run = _run("full", [[1, 0], [0, 0]], [[1, 0], [0, 0]], seeds=(0, 1))
    back = RunResults.load(run.save(tmp_path / "r.json"))
    assert back == run
    run.results.pop()
    with pytest.raises(ResultsError, match="task t001 has no result for seed 1"):
        run.grid()
    run.results += [run.results[0]]
    with pytest.raises(ResultsError, match="task t000 seed 0 appears twice"):
        run.grid()
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(ResultsError, match="not JSON"):
        RunResults.load(tmp_path / "x.json")


def test_pairing_needs_same_tasks_and_split():
    a = _run("a", [[1], [0]], [[1], [0]])
    with pytest.raises(ResultsError, match="different tasks"):
        pair_runs(a, _run("b", [[1]], [[1]]))
    with pytest.raises(ResultsError, match="different splits"):
        pair_runs(a, _run("b", [[1], [0]], [[1], [0]], split="test_heldout"))
    p = pair_runs(a, _run("b", [[0], [0]], [[0], [0]]))
    assert p["schema"] == "study-paired/1" and [t["task"] for t in p["tasks"]] == ["t000", "t001"]
    assert p["tasks"][0]["a"][0]["pass"] is True and p["tasks"][0]["b"][0]["pass"] is False


def _synthetic(n=60, seed=0):
    rng = np.random.default_rng(seed)
    pa, pb = rng.random((n, 1)) < 0.8, rng.random((n, 1)) < 0.6
    fa, fb = pa & (rng.random((n, 1)) < 0.6), pb & (rng.random((n, 1)) < 0.3)
    sa, sb = np.exp(rng.normal(0.1, 0.3, (n, 1))), np.exp(rng.normal(-0.1, 0.3, (n, 1)))
    return _run("full", pa, fa, sa), _run("base", pb, fb, sb), (pa, pb, fa, fb, sa, sb)


def test_compare_numbers_match_references():
    a, b, (pa, pb, fa, fb, sa, sb) = _synthetic()
    rep = compare(pair_runs(a, b), n_boot=2000, seed=1)
    m = rep["metrics"]["faster_than_compile"]
    k = int(fa.sum())
    assert m["a"]["k"] == k and (m["a"]["lo"], m["a"]["hi"]) == pytest.approx(stats.wilson(k, 60))
    ref = scipy.stats.binomtest(k, 60).proportion_ci(method="wilson")
    assert m["a"]["lo"] == pytest.approx(ref.low)
    a_only, b_only = int((fa & ~fb).sum()), int((~fa & fb).sum())
    assert m["mcnemar"]["p"] == pytest.approx(scipy.stats.binomtest(a_only, a_only + b_only).pvalue)
    assert m["diff"]["diff"] == pytest.approx(fa.mean() - fb.mean())
    assert m["diff"]["lo"] < m["diff"]["diff"] < m["diff"]["hi"]
    assert rep["metrics"]["pass"]["a"]["rate"] == pytest.approx(pa.mean())
    g = rep["geomean_vs_compile"]
    assert g["a"]["geomean"] == pytest.approx(scipy.stats.gmean(sa[pa]))
    assert g["a"]["n"] == int(pa.sum())
    both = (pa & pb).ravel()
    ratio = math.exp(np.mean(np.log(sa.ravel()[both]) - np.log(sb.ravel()[both])))
    assert g["paired_ratio"]["ratio"] == pytest.approx(ratio) and g["paired_ratio"]["n_tasks"] == both.sum()


def test_compare_unknown_timing_is_not_zero():
    a, b, _ = _synthetic(10)
    a.results[0].faster_than_compile = None  # CPU mode: no comparable timing
    rep = compare(pair_runs(a, b), n_boot=200)
    assert rep["metrics"]["faster_than_compile"] is None and rep["metrics"]["pass"] is not None


def test_ablation_table_holm():
    n = 60
    full_f = np.zeros((n, 1))
    full_f[:45] = 1
    same = full_f.copy()
    worse = full_f.copy()
    worse[:30] = 0  # loses 30 tasks, wins none: clearly significant
    slight = full_f.copy()
    slight[:3] = 0  # loses 3: McNemar p = 0.25
    full = _run("full", np.ones((n, 1)), full_f)
    runs = {
        name: _run(name, np.ones((n, 1)), f)
        for name, f in (("same", same), ("worse", worse), ("slight", slight))
    }
    t = ablation_table(full, runs, n_boot=2000)
    rows = {r["ablation"]: r for r in t["rows"]}
    assert rows["same"]["diff"] == 0 and rows["same"]["p"] == 1.0 and not rows["same"]["significant"]
    assert (
        rows["worse"]["diff"] == pytest.approx(-0.5)
        and rows["worse"]["hi"] < 0
        and rows["worse"]["significant"]
    )
    assert rows["slight"]["p"] == pytest.approx(0.25) and not rows["slight"]["significant"]
    ps = [rows[k]["p"] for k in ("same", "worse", "slight")]
    assert [rows[k]["p_holm"] for k in ("same", "worse", "slight")] == pytest.approx(
        stats.holm(ps)["adjusted"]
    )
    assert rows["worse"]["p_holm"] == pytest.approx(3 * scipy.stats.binomtest(0, 30).pvalue)


def test_report_prints_and_returns(capsys):
    a, b, _ = _synthetic()
    out = report(a, b, {"no_rl": b}, n_boot=500)
    text = capsys.readouterr().out
    assert "faster_than_compile" in text and "McNemar" in text and "Holm" in text and "no_rl" in text
    assert out["compare"]["a"] == "full" and out["ablations"]["rows"][0]["ablation"] == "no_rl"


def test_check_run_against_protocol():
    ids = [f"t{i:03d}" for i in range(3)]
    protocol = Protocol(ProtocolConfig(), "reduction", {"test_seen": ids}, dict.fromkeys(ids, "0"))
    run = _run("full", [[1], [0], [1]], [[1], [0], [0]])
    run.protocol_sha256 = protocol.sha256
    check_run(run, protocol)
    short = _run("full", [[1], [0]], [[1], [0]])
    short.protocol_sha256 = None
    with pytest.raises(ResultsError, match="1 tasks missing \\(e.g. t002\\)"):
        check_run(short, protocol)
    other = _run("full", [[1], [0], [1]], [[1], [0], [0]])  # protocol_sha256 "abc"
    with pytest.raises(ResultsError, match="another protocol"):
        check_run(other, protocol)
    with pytest.raises(ResultsError, match="no split 'dev'"):
        check_run(_run("x", [[1]], [[1]], split="dev"), protocol)
