"""notebooks/study_report.py on a study directory written with the real writers (``RunResults.save``, the
pipeline's ``MetricsWriter``): its markdown numbers equal a direct numpy computation of the rates and of the
paired difference full - sft, its figures keep the style rules, and a study without results is one line."""

from __future__ import annotations

import json
import re
import runpy
import sys

import numpy as np
import pytest

from research.evaluation import stats
from research.evaluation.paired import RunResults, TaskResult
from research.evaluation.study_figures import (
    METRICS,
    curves_figure,
    delta_figure,
    rates_figure,
    study_report,
)
from research.rl._metrics import MetricsWriter

from .conftest import ROOT
from .figure_checks import figure_problems

TASKS = [f"toy-{i:02d}" for i in range(12)]
N_BOOT = 10000  # the notebook's default, so the CIs below are the same calls


def _outcomes(rng, p: float, timed: bool) -> dict[str, np.ndarray]:
    """(n_tasks,) per metric: pass, and faster only where passed; CPU mode (not timed): faster is null where
    passed (``result_from_verdict``), so the rate is unknown."""
    passed = rng.random(len(TASKS)) < p
    out = {"pass": passed.astype(float)}
    for m in ("faster_than_eager", "faster_than_compile"):
        fast = passed & (rng.random(len(TASKS)) < 0.5)
        out[m] = fast.astype(float) if timed else np.where(passed, np.nan, 0.0)
    return out


def _write_results(root, kind, seed, split, o):
    rows = []
    for i, t in enumerate(TASKS):
        flag = lambda m, i=i: None if np.isnan(o[m][i]) else bool(o[m][i])  # noqa: E731
        ok = bool(o["pass"][i])
        rows.append(
            TaskResult(
                t, seed, "correct" if ok else "incorrect", ok, flag("faster_than_eager"),
                flag("faster_than_compile"), 1.2 if ok else None, 1.1 if ok else None,
            )
        )  # fmt: skip
    RunResults(f"{kind}-s{seed}", split, rows, "abc123").save(
        root / "results" / f"{kind}-s{seed}.{split}.json"
    )


def _write_run(root, run, stages, skipped=None):
    """runs/<run>/<stage>/metrics.jsonl through the pipeline's writer; pipeline.json as run_pipeline writes
    it. sft logs nll only (no rollout metrics)."""
    out = root / "runs" / run
    for stage, n in stages.items():
        w = MetricsWriter(out / stage, tensorboard=False)
        for s in range(1, n + 1):
            row = {"nll": 1.0 / s} if stage == "sft" else {"reward_mean": 0.1 * s, "pass_rate": 0.05 * s}
            w.write(s, row)
        w.close()
    summary = {
        "stages": {s: str(out / s / "manifest.json") for s in stages},
        "skipped": skipped or {},
        "truncated": False,
        "time_s": {},
    }
    (out / "pipeline.json").write_text(json.dumps(summary, indent=2))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """sft and full with seeds 0 and 1, the ablation no_rft with seed 0, on dev (timed) and test_seen (CPU
    mode: faster_* unknown); full-s1 lacks its warmup and rft stages, no_rft has no training run."""
    root = tmp_path_factory.mktemp("study")
    rng = np.random.default_rng(3)
    truth = {}
    for split, timed in (("dev", True), ("test_seen", False)):
        for kind, seeds, p in (("sft", (0, 1), 0.4), ("full", (0, 1), 0.7), ("no_rft", (0,), 0.5)):
            for s in seeds:
                truth[(split, kind, s)] = o = _outcomes(rng, p, timed)
                _write_results(root, kind, s, split, o)
    _write_run(root, "sft-s0", {"sft": 3})
    _write_run(root, "sft-s1", {"sft": 3})
    _write_run(root, "full-s0", {"sft": 3, "warmup": 2, "rft": 2, "ppo": 4})
    _write_run(root, "full-s1", {"sft": 3, "ppo": 1}, skipped={"rft": "rft.enabled=false"})
    return root, truth


def _notebook(monkeypatch, *args):
    monkeypatch.setattr(sys, "argv", ["study_report.py", *map(str, args)])
    return runpy.run_path(str(ROOT / "notebooks" / "study_report.py"), run_name="__main__")


def _table(md: str, header: str) -> list[list[str]]:
    """The cells of the markdown table under ``## {header}``."""
    section = md.split(f"## {header}", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| split | ")]
    rows = [r for r in rows if not r.startswith("| run | ")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows]


def _cell(est: float, lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(est)} [{f.format(lo)}, {f.format(hi)}]"


@pytest.fixture(scope="module")
def reported(study, tmp_path_factory):
    root, truth = study
    out = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as mp:
        _notebook(mp, root, out)
    return root, truth, out


def test_rates_in_the_markdown_equal_numpy(reported):
    _, truth, out = reported
    md = (out / "study_report.md").read_text()
    rows = {(r[0], r[1], r[2]): r for r in _table(md, "Rates per run")}
    kinds = {(split, kind) for split, kind, _ in truth}
    want_keys = set()
    for split, kind in kinds:
        seeds = sorted(s for sp, k, s in truth if (sp, k) == (split, kind))
        groups = [(str(s), [s]) for s in seeds] + ([("pooled", seeds)] if len(seeds) > 1 else [])
        for label, ss in groups:
            want_keys.add((split, kind, label))
            row = rows[(split, kind, label)]
            assert row[3] == str(len(TASKS))
            for j, m in enumerate(METRICS):
                x = np.stack([truth[(split, kind, s)][m] for s in ss], axis=1)  # (tasks, seeds)
                if np.isnan(x).any():
                    assert row[4 + j] == "n/a"
                    continue
                est = float(np.mean(x))  # independent point estimate: the share of (task, seed) successes
                assert row[4 + j].split(" [")[0] == f"{est:.3f}"
                ci = stats.mean_ci(x, N_BOOT, 0)
                assert row[4 + j] == _cell(est, ci["lo"], ci["hi"])
    assert set(rows) == want_keys
    assert [k for k in rows if k[0] == "dev"][:3] == [
        ("dev", "sft", "0"),
        ("dev", "sft", "1"),
        ("dev", "sft", "pooled"),
    ]


def test_paired_delta_in_the_markdown_equals_numpy(reported):
    _, truth, out = reported
    md = (out / "study_report.md").read_text()
    rows = {(r[0], r[1]): r for r in _table(md, "Paired difference full - sft")}
    assert set(rows) == {(sp, s) for sp in ("dev", "test_seen") for s in ("0", "1", "pooled")}
    for (split, label), row in rows.items():
        ss = [0, 1] if label == "pooled" else [int(label)]
        for j, m in enumerate(METRICS):
            a = np.stack([truth[(split, "full", s)][m] for s in ss], axis=1)
            b = np.stack([truth[(split, "sft", s)][m] for s in ss], axis=1)
            if np.isnan(a).any() or np.isnan(b).any():
                assert row[3 + j] == "n/a"
                continue
            diff = float(a.mean() - b.mean())  # independent: difference of the two success shares
            d = stats.paired_bootstrap(a, b, N_BOOT, 0)
            p = stats.mcnemar(a, b)["p"]
            assert row[3 + j].split(" [")[0] == f"{diff:+.3f}"
            assert row[3 + j] == f"{_cell(diff, d['lo'], d['hi'], True)} (p {p:.3g})"
    rep = json.loads((out / "study_report.json").read_text())
    pooled = next(r for r in rep["deltas"] if r["split"] == "dev" and r["seed"] == "pooled")
    a = np.stack([truth[("dev", "full", s)]["pass"] for s in (0, 1)], axis=1)
    b = np.stack([truth[("dev", "sft", s)]["pass"] for s in (0, 1)], axis=1)
    assert pooled["pass"]["diff"] == pytest.approx(a.mean() - b.mean(), abs=1e-12)
    assert pooled["pass"]["a"] == pytest.approx(a.mean(), abs=1e-12)


def test_training_table_and_figures(reported):
    _, _, out = reported
    md = (out / "study_report.md").read_text()
    rows = _table(md, "Training (last step of each stage)")
    got = {(r[0], r[1]): r[2:] for r in rows}
    assert got[("full-s0", "ppo")] == ["4", f"{0.1 * 4:.3f}", f"{0.05 * 4:.3f}"]
    assert got[("full-s1", "ppo")] == ["1", "0.100", "0.050"]
    assert got[("full-s1", "rft")][0] == "skipped: rft.enabled=false"
    assert got[("sft-s0", "sft")] == ["3", "-", "-"]
    assert ("full-s1", "warmup") not in got  # a missing stage is absent, not an error
    for stem in (
        "rates_dev",
        "rates_test_seen",
        "delta_dev",
        "delta_test_seen",
        "curves_warmup",
        "curves_ppo",
    ):
        assert (out / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / f"{stem}.pdf").read_bytes()[:4] == b"%PDF"
    assert not (out / "curves_sft.png").exists()  # sft logs no reward_mean / pass_rate


def test_figures_keep_the_style_rules(study, tmp_path):
    root, _ = study
    rep = study_report(root, tmp_path, n_boot=200)
    for split in ("dev", "test_seen"):  # test_seen: the faster_* panels say n/a
        assert figure_problems(rates_figure(rep["rates"], split)) == []
        assert figure_problems(delta_figure(rep["deltas"], split)) == []
    curves = rep["training"]["curves"]
    assert set(curves) == {"warmup", "rft", "ppo"}
    assert set(curves["ppo"]) == {"full-s0", "full-s1"} and curves["ppo"]["full-s1"]["pass_rate"] == [
        (1, 0.05)
    ]
    assert figure_problems(curves_figure(curves["ppo"], "ppo"), count_axes=[(0, "x"), (1, "x")]) == []


def test_single_seed_without_training_runs(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    o_full, o_sft = _outcomes(rng, 0.8, True), _outcomes(rng, 0.3, True)
    _write_results(tmp_path, "full", 0, "dev", o_full)
    _write_results(tmp_path, "sft", 0, "dev", o_sft)
    _notebook(monkeypatch, tmp_path)
    md = (tmp_path / "report" / "study_report.md").read_text()
    deltas = _table(md, "Paired difference full - sft")
    assert [r[:2] for r in deltas] == [["dev", "0"]]  # one seed: no pooled row
    assert deltas[0][3].startswith(f"{o_full['pass'].mean() - o_sft['pass'].mean():+.3f} [")
    assert [r[:3] for r in _table(md, "Rates per run")] == [["dev", "sft", "0"], ["dev", "full", "0"]]
    assert "no training runs" in md
    assert (tmp_path / "report" / "delta_dev.png").is_file()


@pytest.mark.parametrize("make", ["empty_results", "no_dir", "bad_file"])
def test_a_study_without_results_is_one_line(tmp_path, monkeypatch, capsys, make):
    study = tmp_path / "study"
    if make != "no_dir":
        (study / "results").mkdir(parents=True)
    if make == "bad_file":
        (study / "results" / "x.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        _notebook(monkeypatch, study)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    want = {
        "empty_results": "no results",
        "no_dir": "no study directory",
        "bad_file": "not a study-results/1",
    }
    assert re.search(want[make], err), err
    assert not (study / "report").exists()
