"""benchmarks/soak.py at a small count in CPU mode: every category's verdict is the one its candidate earned,
no request is lost or hangs, no worker process or temporary file outlives the client."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import soak  # noqa: E402


def test_expectations_match_verdicts():
    by_name = {c.name: c for c in soak.CATEGORIES}
    assert soak.earned(by_name["abort"], {"status": "runtime_error", "error": "killed by SIGABRT"})
    assert not soak.earned(by_name["abort"], {"status": "runtime_error", "error": "ValueError"})
    forged = by_name["forged:forge_reply_protocol_fd"]
    assert soak.earned(forged, {"status": "rejected", "check": "protocol_forgery"})
    assert not soak.earned(forged, {"status": "rejected", "check": "no_custom_kernel"})
    assert not soak.earned(by_name["correct"], {"status": "incorrect"})
    illegal = by_name["illegal_address"]
    assert illegal.gpu_only and soak.earned(illegal, {"status": "rejected", "check": "launch_error"})
    assert all(not c.gpu_only for c in soak.plan(40, "cpu", 0))  # illegal addresses need a GPU


def test_soak_invariants_hold_on_cpu():
    args = ["--count", "20", "--concurrency", "3", "--device", "cpu", "--no-progress", "--seed", "1",
            "--compile-timeout", "6", "--run-timeout", "6"]  # fmt: skip
    result = soak.run(soak.parse(args))
    assert result["violations"] == [] and result["ok"], result["violations"]
    categories = result["categories"]
    assert sum(c["count"] for c in categories.values()) == 20
    kinds = {"correct", "wrong", "abort", "segfault", "hang_import", "hang_forward", "hang_kernel", "memory"}
    assert kinds <= set(categories)
    assert all(c["earned"] == c["count"] for c in categories.values())
    # each crash, hang or memory overrun in the run stage replaced the run worker; an import hang only
    # killed its forked compile child, never the compile worker
    deaths = ("abort", "segfault", "hang_forward", "hang_kernel", "memory")
    assert result["restarts"].get("run", 0) >= sum(categories[k]["count"] for k in deaths)
    assert result["restarts"].get("compile", 0) == 0
