"""A small released set judged end to end by the CPU sandbox (Triton under the interpreter): the verdicts,
the claims-vs-measured table against a direct computation from results.jsonl, per-source Table 1 against
the sandbox's summary, resuming, and the one command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kernels_env.client import summarize
from research.evaluation import evaluate_solution_set, read_results

from .conftest import ROOT

EXPECTED = {
    "a1": "correct",
    "a2": "incorrect",
    "b1": "correct",
    "b2": "compile_error",
    "b3": "rejected",
    "b4": "correct",
}


def _results(cfg):
    return [json.loads(line) for line in (Path(cfg.out_dir) / "results.jsonl").read_text().splitlines()]


def test_verdicts_and_layout(judged_set):
    cfg, report = judged_set
    results = _results(cfg)
    assert {r["record_id"]: r["status"] for r in results} == EXPECTED
    assert next(r for r in results if r["record_id"] == "b3")["check"] == "forbidden_op"
    out = Path(cfg.out_dir)
    imported = json.loads((out / "import.json").read_text())
    assert imported["records"] == 7 and imported["solutions"] == 6
    assert [u["record_id"] for u in imported["unmatched"]] == ["c1"]
    # the batch layout `python -m kernels_env batch` reads: problems are links into the checkout
    link = out / "problems" / "level1" / "1_relu.py"
    assert (
        link.is_symlink() and link.resolve() == (Path(cfg.kernelbench_dir) / "level1" / "1_relu.py").resolve()
    )
    for r in results:
        assert (out / "solutions" / f"{r['key']}.py").is_file() and r["solution"] == f"{r['key']}.py"


def _direct_outcome(r, mode, min_ratio):
    """Independent of research.evaluation.claims: the rule as docs/reproducing.md states it."""
    if r["status"] != "correct":
        return f"rejected:{r['check']}" if r["status"] == "rejected" else r["status"]
    sp = (r.get("speedups") or {}).get(mode)
    if not (r.get("timings") or {}).get("comparable") or sp is None:
        return "timing_not_comparable"
    return "survives" if sp >= min_ratio * r["claimed"][mode] else "slower_than_claimed"


def test_claims_table_matches_the_results_file(judged_set):
    cfg, report = judged_set
    results = _results(cfg)
    claims = json.loads((Path(cfg.out_dir) / "claims.json").read_text())
    assert claims == json.loads(json.dumps(report["claims"]))
    for source in ("sysA", "sysB"):
        mine = [r for r in results if r["source"] == source]
        s = claims["sources"][source]
        assert s["solutions"] == len(mine) and s["correct"] == sum(r["status"] == "correct" for r in mine)
        for mode in ("eager", "compile"):
            with_claim = [r for r in mine if r["claimed"].get(mode) is not None]
            outcomes = Counter(_direct_outcome(r, mode, cfg.claims.min_ratio) for r in with_claim)
            assert s["baselines"][mode]["claims"] == len(with_claim)
            assert s["baselines"][mode]["outcomes"] == dict(outcomes)
            assert s["baselines"][mode]["survive"] == outcomes["survives"]
    # on CPU nothing is timed: no claim can survive, and the table says why each one does not
    assert claims["sources"]["sysB"]["baselines"]["eager"]["outcomes"] == {
        "compile_error": 1,
        "rejected:forbidden_op": 1,
        "timing_not_comparable": 2,
    }
    assert "sysC" not in claims["sources"]  # unmatched: in import.json, not judged


def test_table1_per_source_is_the_sandbox_summary(judged_set):
    cfg, _ = judged_set
    results = _results(cfg)
    table = json.loads((Path(cfg.out_dir) / "table1.json").read_text())
    # the checkout's tasks at the set's levels
    every = ["level1/1_relu", "level2/3_scale", "level2/4_zero", "level2/5_unsolved"]
    assert table["tasks"] == 4
    for source, rep in table["by_source"].items():
        mine = [r for r in results if r["source"] == source]
        keyed = [{**r, "problem": f"level{r['level']}/{r['problem']}"} for r in mine]
        direct = summarize(keyed, every)  # a task without a solution counts as failed
        assert rep["full"]["overall"]["pass_rate"] == direct["fast_p"]["eager"]["0"]
        missing = len(set(every) - {r["problem"] for r in keyed})
        # tasks: distinct (the shares' denominator: sysA's two relu solutions are one task); results: all rows
        assert rep["full"]["overall"]["tasks"] == len({r["problem"] for r in keyed}) + missing == len(every)
        assert rep["full"]["overall"]["results"] == len(mine) + missing
        assert rep["full"]["overall"]["status_counts"].get("no_solution", 0) == missing
        assert rep["labels"]["protocol"] == "kernelbench" and rep["labels"]["gpu"].startswith("none (CPU")
    # sysA: only the relu problem, two solutions (one correct): it weighs 1 (the mean), level 2 is all missing
    assert table["by_source"]["sysA"]["full"]["levels"]["1"]["pass_rate"] == 0.5
    assert table["by_source"]["sysA"]["full"]["levels"]["2"]["pass_rate"] == 0.0
    assert table["by_source"]["sysA"]["full"]["overall"]["pass_rate"] == 0.5 / 4
    # sysB: 3_scale has 3 solutions (1 correct), 4_zero 1 (correct), 5_unsolved none: (1/3 + 1 + 0) / 3;
    # level 1 missing
    sys_b = table["by_source"]["sysB"]["full"]["levels"]
    assert sys_b["2"]["pass_rate"] == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert table["by_source"]["sysB"]["full"]["levels"]["1"]["pass_rate"] == 0.0


def test_rerun_resumes_and_rejudges_only_a_torn_line(judged_set):
    cfg, _ = judged_set
    path = Path(cfg.out_dir) / "results.jsonl"
    before = path.read_bytes()
    evaluate_solution_set(cfg)  # everything done: nothing judged, nothing rewritten
    assert path.read_bytes() == before
    lines = before.decode().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][:40])  # a kill in the middle of the last write
    evaluate_solution_set(cfg)
    after = read_results(path)
    assert (
        set(after) == {json.loads(line)["key"] for line in lines} and len(path.read_text().splitlines()) == 6
    )
    assert {r["record_id"]: r["status"] for r in after.values()} == EXPECTED


MAPPING_ARGS = [
    "mapping.code=src",
    "mapping.level=meta.level",
    "mapping.problem_id=null",
    "mapping.problem_name=task",
    "mapping.id=uid",
    "mapping.source=system",
    "mapping.claimed_speedup_eager=claims.eager",
    "mapping.claimed_speedup_compile=claims.compile",
]


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "experiments.solutions", *args, "hydra.run.dir=" + args[-1].split("=", 1)[1]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_one_command(judged_set):
    cfg, _ = judged_set
    out = _cli(
        f"input={cfg.input}",
        f"kernelbench_dir={cfg.kernelbench_dir}",
        "sandbox=cpu",
        "progress=false",
        *MAPPING_ARGS,
        f"out_dir={cfg.out_dir}",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "7 records: 6 solutions to judge, 1 matching no problem, 0 duplicate ids" in out.stdout
    assert "rejected:forbidden_op 1" in out.stdout and "Table 1, source sysB" in out.stdout


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_one_command_without_a_checkout_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KERNELBENCH_DIR"}
    (tmp_path / "s.jsonl").write_text("{}\n")
    out = _cli(f"input={tmp_path / 's.jsonl'}", f"out_dir={tmp_path / 'o'}", env=env)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: no KernelBench checkout: set KERNELBENCH_DIR or the config's kernelbench_dir to a clone of "
        "ScalingIntelligence/KernelBench"
    ]
