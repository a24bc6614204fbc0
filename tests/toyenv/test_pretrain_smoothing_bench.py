"""benchmarks.toyenv.toy_pretrain_smoothing on CPU, tiny: the run completes, every split reports sampled
and greedy shares and the fusion probability, and the JSON holds what was printed."""

import json

import pytest


def test_smoothing_benchmark_smoke(tmp_path):
    from benchmarks.toyenv import toy_pretrain_smoothing

    out = tmp_path / "s.json"
    args = [
        "--smoothing",
        "0.3",
        "--detour-rates",
        "0.3",
        "--steps",
        "2",
        "--samples",
        "32",
        "--corpus-tasks",
        "48",
    ]
    toy_pretrain_smoothing.main([*args, "--work", str(tmp_path / "w"), "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(r["smoothing"], r["detour_rate"]) for r in rows] == [(0.3, 0.3)]
    for r in rows:
        assert r["pretrain"]["step"] == 2
        for split in ("train", "test", "heldout_category"):
            s = r["splits"][split]
            assert s["sampled"]["n"] == 32 and 0.0 <= s["sampled"]["invalid"] <= 1.0
            assert s["greedy"]["n"] == s["tasks"] and set(s["sampled"]["optimisations"]) >= {"fusion", "any"}
            assert 0.0 < s["p_fuse_first_pair"] < 1.0
            valid = 1 - s["sampled"]["invalid"]
            for k, v in s["sampled"]["valid_using"].items():
                assert v == pytest.approx(s["sampled"]["optimisations"][k] * valid)
