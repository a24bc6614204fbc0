"""benchmarks.models.plot_sizes reads the recorded size runs (docs/results/data/sizes_*.json) into its panels
and draws them; a missing input is one line, exit 2."""

import json
from pathlib import Path

import pytest

from benchmarks.models import plot_sizes

DATA = Path(__file__).resolve().parents[2] / "docs" / "results" / "data" / "sizes_2026-12-05_h200.json"


def test_series_reads_the_recorded_runs():
    s = plot_sizes.series(json.loads(DATA.read_text()))
    train = dict(s["train"])
    # the earlier 1.5B / 8K run (train_step_1.5b_8k_first, 44.8%) is left out; the page cites both
    assert set(train) == {"1.5b / 8k", "1.5b / 32k", "3b / 8k", "3b / 32k"}
    assert train["1.5b / 8k"] == pytest.approx(0.44583, abs=1e-5)
    assert [b for b, *_ in s["decode"]] == [1, 16, 64, 256]
    by_batch = {b: (ours, hf) for b, ours, hf in s["decode"]}
    assert by_batch[64][0] / by_batch[64][1] == pytest.approx(2.688, abs=1e-3) and by_batch[16][1] is None
    # five compile-only cases and the two run cases, the run's repeat of 1.5B actor counted once
    assert len(s["memory"]) == 6
    label, xla, predicted = next(m for m in s["memory"] if m[0] == "0.5b 32K actor+critic")
    assert xla == pytest.approx(77.47, abs=0.01) and predicted == pytest.approx(49.63, abs=0.01)


def test_plot_writes_a_png_and_refuses_a_missing_file(tmp_path, capsys):
    out = tmp_path / "sizes.png"
    assert plot_sizes.main([str(DATA), str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_sizes.main([str(tmp_path / "none.json"), str(out)]) == 2
    assert "no such file" in capsys.readouterr().err
