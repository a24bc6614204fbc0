"""benchmarks.models.rollout_engine --smoke (CPU, tiny random model): every mode runs the same agentic
workload end to end and records sane numbers (the real ones come from a GPU run)."""

from __future__ import annotations

import json


def test_rollout_engine_benchmark_smoke(tmp_path):
    from benchmarks.models import rollout_engine as bench

    out = tmp_path / "rollout_engine.json"
    record = bench.main(["--smoke", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(record, default=str))
    assert record["smoke"] and "date_utc" in record["environment"]
    res = record["results"]
    assert list(res) == list(bench.MODES)
    turns = record["turns"]
    assert turns > record["episodes"]  # some episodes continue for more than one turn
    for mode, r in res.items():
        assert r["generated_tokens"] > 0 and r["tokens_per_s"] > 0 and 0 < r["occupancy"] <= 1, mode
    engines = [res[m] for m in ("engine_lockstep", "engine_continuous", "engine_full")]
    # Same keys, same workload: the engine modes generate the same tokens (scheduling changes nothing else).
    assert len({r["generated_tokens"] for r in engines}) == 1
    assert all(r["prefill_saved_continuation"] > 0 for r in engines)  # later turns reuse their KV
    full, cont = res["engine_full"], res["engine_continuous"]
    assert full["prefill_saved_sharing"] > 0 and cont["prefill_saved_sharing"] == 0
    assert full["prefill_tokens"] + full["prefill_saved_sharing"] == cont["prefill_tokens"]


def test_rollout_engine_budget_skips_modes_and_still_writes(tmp_path):
    """A budget spent before a mode starts skips it (recorded), and the JSON is written either way: a GPU
    call's outer timeout must not lose the modes that finished."""
    from benchmarks.models import rollout_engine as bench

    out = tmp_path / "r.json"
    record = bench.main(["--smoke", "--budget-s", "1e-9", "--out", str(out)])
    assert record["results"] == {m: {"skipped": "budget"} for m in bench.MODES}
    assert json.loads(out.read_text())["results"] == record["results"]
