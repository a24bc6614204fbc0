"""benchmarks/agent_loop.py in its --smoke setting (CPU sandbox, tiny model): it runs end to end and records
every section with sane values (the real numbers come from a GPU run)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_agent_loop_benchmark_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location("agent_loop_bench", ROOT / "benchmarks" / "agent_loop.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "agent_loop.json"
    record = bench.main(["--smoke", "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["smoke"] and "date" in record["environment"]
    lo = record["loop_overhead"]
    assert lo["turns"] == 4 and lo["tool_s"] > 0 and lo["overhead_share_of_sandbox"] is not None
    fe = record["flax_episodes"]
    assert fe["episodes"] == 2 and fe["generated_tokens_per_s"] > 0 and fe["end_reasons"] == ["max_turns"]
    assert fe["final_status"] == ["correct"]  # the final judging really ran
    cv = record["cache_vs_reprefill"]
    assert cv["prefill_tokens_cache"] < cv["prefill_tokens_reprefill"]
