"""The report figures keep the paper rules (figure_checks): level labels "L1" / "held-out", legends beside the
bars, whole-number ticks on count axes, a note in every panel without data (CPU mode: no timings), markers
on one-point series, at most 6 panels (the RL curves split into pages)."""

from __future__ import annotations

import pytest

from research import rl
from research.evaluation import figures, table1_report
from research.evaluation.style import pyplot

from .figure_checks import figure_problems


def _verdict(problem, level, ok=True, speedups=None, gpu=True):
    return {
        "problem": problem,
        "level": level,
        "status": "correct" if ok else "incorrect",
        "reward": 1.0 if ok else -1.0,
        "speedups": speedups or {},
        "timings": {"comparable": gpu},
        "environment": {"gpu": "NVIDIA H200", "torch": "2.9"} if gpu else {"device": "cpu", "torch": "2.9"},
        "judge": {"protocol": "kernelbench", "policy": "strict"},
    }


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    pyplot().close("all")


def test_table1_levels_read_l1_and_held_out_and_the_legend_covers_no_bar():
    fast = {"eager": 2.0, "compile": 1.5}
    results = [_verdict(f"{i}_op", lv, speedups=fast) for i, lv in enumerate(["1", "2", "heldout", "1"])]
    fig = figures.table1_figure(table1_report(results))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["overall", "L1", "L2", "held-out"]
    # every share is 1.0: bars fill the panel to its top, where a legend inside it would sit
    assert max(p.get_height() for p in ax.patches) == pytest.approx(1.0)
    assert figure_problems(fig) == []


def test_table1_in_cpu_mode_marks_unmeasured_shares():
    results = [_verdict("1_relu", 1, gpu=False), _verdict("2_scale", 1, ok=False, gpu=False)]
    fig = figures.table1_figure(table1_report(results))
    # pass rate measured; the two faster-than shares (2 levels: overall, L1) read n/a
    assert [t.get_text() for t in fig.axes[0].texts].count("n/a") == 4
    assert figure_problems(fig) == []


def test_claims_counts_are_whole_numbers_and_no_timings_is_a_note():
    rows = [
        {"source": "sysA", "outcome": "timing_not_comparable", "claimed": 2.0, "measured": None},
        {"source": "sysA", "outcome": "rejected:syntax", "claimed": 3.0, "measured": None},
        {"source": "sysB", "outcome": "timing_not_comparable", "claimed": 1.5, "measured": None},
    ]
    fig = figures.claims_figure({"rows": rows})
    assert figure_problems(fig, count_axes=[(0, "y")]) == []
    assert "CPU mode" in fig.axes[1].texts[0].get_text()
    measured = [dict(r, outcome="survives", measured=r["claimed"] * 0.9) for r in rows]
    assert figure_problems(figures.claims_figure({"rows": measured}), count_axes=[(0, "y")]) == []


def test_audit_counts_are_whole_numbers_and_no_flags_is_a_note():
    reports = [
        {
            "status": "ok",
            "flags": [{"kind": "constant", "tolerance": 1e-4}, {"kind": "constant", "tolerance": 1e-2}],
        },
        {"status": "ok", "flags": [{"kind": "zeros_pass", "tolerance": 1e-4}]},
        {"status": "error", "flags": []},
    ]
    fig = figures.audit_figure(reports)
    assert figure_problems(fig, count_axes=[(0, "x"), (1, "y")]) == []
    clean = figures.audit_figure([{"status": "ok", "flags": []}])
    assert "no problem flagged" in clean.axes[0].texts[0].get_text()
    assert figure_problems(clean, count_axes=[(1, "y")]) == []


def test_training_curves_mark_single_points_and_say_which_curves_are_missing():
    data = {
        "reward": {"full seed 0": [(1, 0.1), (2, 0.3)], "full seed 1": [(1, 0.2), (2, 0.4)]},
        "entropy": {"full seed 0": [(2, 1.5)]},  # logged once: a marker, not an invisible line
    }
    fig = figures.curves_figure(data)
    assert figure_problems(fig, count_axes=[(0, "x"), (2, "x")]) == []
    notes = {ax.get_title(): [t.get_text() for t in ax.texts] for ax in fig.axes}
    assert notes["clip fraction"] == ["not logged by any point"] and notes["reward"] == []


def test_rl_stage_curves_are_pages_of_at_most_six_panels(tmp_path):
    w = rl.MetricsWriter(tmp_path, tensorboard=False)
    keys = [f"m{i}" for i in range(8)]
    for s in range(1, 4):
        w.write(s, {k: s * (i + 1) / 10 for i, k in enumerate(keys)} | ({"once": 0.5} if s == 2 else {}))
    w.close()
    rows = rl.read_metrics(tmp_path)
    figs = rl._metrics.curve_figures(rows, sorted(keys + ["once"]))
    assert [len(f.axes) for f in figs] == [6, 3]
    for f in figs:
        assert figure_problems(f, count_axes=[(i, "x") for i in range(len(f.axes))]) == []
    (tmp_path / "c_3.png").write_bytes(b"stale page of a longer earlier run")
    first = rl.plot_curves(tmp_path / "metrics.jsonl", tmp_path / "c.png")
    assert first == tmp_path / "c.png" and (tmp_path / "c_2.png").is_file()
    assert not (tmp_path / "c_3.png").exists()
