"""The soak (tests/stress/soak.py) at a small count, CPU mode: every category's verdict is the one its
candidate earned, no request is lost or hangs, no worker process or temporary file outlives the client."""

from __future__ import annotations

import json

from . import soak


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


# The run stage's limit covers the judge's own work before the candidate's (building the models, the memory
# preflight, the reference): with two run workers beside CI's other tests on 2 cores, 6 s was once too short
# for the memory hog to reach its limit first. The hangs each cost this much.
RUN_TIMEOUT_S = 15


def test_soak_invariants_hold_on_cpu():
    args = ["--count", "20", "--concurrency", "3", "--device", "cpu", "--no-progress", "--seed", "1",
            "--compile-timeout", "6", "--run-timeout", str(RUN_TIMEOUT_S)]  # fmt: skip
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


def test_soak_with_two_run_workers_sharing_the_cpu():
    """--run-workers-per-gpu 2 (two run workers, each with its standby, on the CPU): the same invariants, and
    the report says how the sandbox was set up and where the verdicts' time went."""
    args = ["--count", "12", "--concurrency", "4", "--device", "cpu", "--no-progress", "--seed", "2",
            "--compile-timeout", "6", "--run-timeout", str(RUN_TIMEOUT_S),
            "--run-workers-per-gpu", "2"]  # fmt: skip
    result = soak.run(soak.parse(args))
    assert result["violations"] == [] and result["ok"], result["violations"]
    assert result["run_workers_per_gpu"] == 2 and result["done"] == 12 and result["compile_workers"] == 2
    categories = result["categories"]
    assert len(categories) == 11 and all(c["earned"] == c["count"] for c in categories.values())
    deaths = ("abort", "segfault", "hang_forward", "hang_kernel", "memory")
    assert result["restarts"].get("run", 0) >= sum(categories[k]["count"] for k in deaths)
    assert result["restart_s"]["run"]["median_s"] > 0 and result["startup_s"] > 0
    split = result["time_split"]
    assert set(split) == {"queued_s", "compile_s", "run_s", "in_timeouts_s"}
    hangs = sum(categories[k]["count"] for k in ("hang_forward", "hang_kernel"))
    assert split["in_timeouts_s"] >= RUN_TIMEOUT_S * hangs
    assert categories["hang_import"]["median_compile_s"] >= 6 and categories["correct"]["median_run_s"] > 0


def test_soak_with_two_run_workers_timing_under_the_gpu_lock(monkeypatch):
    """--timing with two run workers under the GPU lock (its CPU test hook): hangs and crashes while the lock
    is held shared, timed candidates waiting for exclusive: every verdict is still the one earned (a worker
    queued behind a neighbour's hang is not timed out for it), nothing leaks."""
    from kernels_env.host import gpu_lock

    monkeypatch.setenv(gpu_lock.CPU_HOOK, "1")
    args = ["--count", "12", "--concurrency", "4", "--device", "cpu", "--no-progress", "--seed", "3",
            "--timing", "--compile-timeout", "6", "--run-timeout", str(RUN_TIMEOUT_S),
            "--run-workers-per-gpu", "2"]  # fmt: skip
    result = soak.run(soak.parse(args))
    assert result["violations"] == [] and result["ok"], result["violations"]
    assert result["timing_lock"] is True and result["done"] == 12
    assert result["time_split"]["gpu_wait_s"] >= 0
    assert sum(c["earned"] for c in result["categories"].values()) == 12


# a run cut short (soak --budget-s, SIGTERM)  -------------------------------------------------
class _FakeSandbox:
    """``submit`` returns a future that resolves after ``delay_s`` with the verdict its category earned."""

    def __init__(self, delay_s: float):
        import concurrent.futures

        self.delay_s, self.submitted = delay_s, 0
        self.pool = concurrent.futures.ThreadPoolExecutor(8)
        self.bodies = {_body(c.source(0)): c for c in soak.CATEGORIES}

    def submit(self, reference, source, judge):
        self.submitted += 1
        return self.pool.submit(self._verdict, self.bodies[_body(source)])

    def _verdict(self, category) -> dict:
        import time

        time.sleep(self.delay_s)
        status, _, check = category.expect.split("|")[0].partition(":")
        error = soak.NEEDLES.get(category.name, "")
        return {"status": status, "check": check or None, "error": error, "durations_s": {"total": 0.1}}


def _body(source) -> str:
    """A candidate's source without its first line (the comment that makes each one unique)."""
    text = source if isinstance(source, str) else source.files["model_new.py"]
    return text.split("\n", 1)[1]


def test_budget_stops_submitting_and_collects_what_is_in_flight(capsys, monkeypatch):
    import time

    args = soak.parse(["--count", "400", "--concurrency", "3", "--device", "cpu", "--no-progress",
                       "--budget-s", "2", "--compile-timeout", "0.1", "--run-timeout", "0.1"])  # fmt: skip
    monkeypatch.setattr(soak, "CLOSE_MARGIN_S", 0.5)
    sb = _FakeSandbox(delay_s=0.05)
    t0 = time.monotonic()
    done = soak.drive(sb, soak.plan(args.count, "cpu", 0), None, args, started=t0)
    assert done.stopped_by == "budget" and 25 <= len(done.records) < 400 and time.monotonic() - t0 < 2.0
    assert done.submitted == sb.submitted == len(done.records) and done.abandoned == []  # drained, none lost
    assert all(r["earned"] for r in done.records)
    result = soak.report(done.records, 1.0, {}, set(), set(), "cpu", {}, args, done)
    assert result["truncated"] and result["done"] == len(done.records) and result["stopped_by"] == "budget"
    assert result["violations"] == [] and result["ok"] and result["count"] == 400
    assert sum(c["count"] for c in result["categories"].values()) == result["done"]
    err = capsys.readouterr().err
    assert "budget of 2 s nearly used" in err and "soak: 25/400 done, 2 in flight" in err  # every 25


def test_a_signal_abandons_the_requests_in_flight_and_a_lost_record_is_a_violation(capsys):
    import threading

    args = soak.parse(["--count", "50", "--concurrency", "3", "--device", "cpu", "--no-progress"])
    stop = soak.Stop()
    sb = _FakeSandbox(delay_s=0.3)
    threading.Timer(1.0, lambda: setattr(stop, "signal", "SIGTERM")).start()
    done = soak.drive(sb, soak.plan(args.count, "cpu", 0), None, args, stop=stop)
    assert done.stopped_by == "SIGTERM" and 0 < len(done.records) < 50 and len(done.abandoned) in (2, 3)
    assert done.submitted == len(done.records) + len(done.abandoned) == sb.submitted
    result = soak.report(done.records, 1.0, {}, set(), set(), "cpu", {}, args, done)
    assert result["truncated"] and result["abandoned"] == len(done.abandoned) and result["violations"] == []
    lost = soak.Done(done.records[:-1], done.submitted, done.abandoned, "SIGTERM")
    assert soak.report(lost.records, 1.0, {}, set(), set(), "cpu", {}, args, lost)["violations"] == [
        "1 requests without a record"
    ]
    assert f"SIGTERM: abandoning {len(done.abandoned)} request(s) in flight" in capsys.readouterr().err


def test_progress_lines_every_25_verdicts_or_20_s(capsys, monkeypatch):
    records = [{"category": "abort", "earned": True}] * 3 + [{"category": "correct", "earned": False}]
    line = soak.progress_line(records, 500, 4, 61.2)
    assert line == "4/500 done, 4 in flight, 61 s, 1 violations | abort 3, correct 1 (1 unearned)"
    progress = soak.Progress(500, True, 0.0, records, [])
    progress.tick()
    assert capsys.readouterr().err == ""  # under 20 s since the last line
    monkeypatch.setattr(progress, "last", progress.last - 21)
    progress.tick()
    assert "soak: 4/500 done, 0 in flight" in capsys.readouterr().err


def test_sigterm_writes_the_report_and_exits_nonzero(tmp_path, monkeypatch):
    import os
    import signal

    def run(args, stop, started):  # stands in for the sandbox run: waits for the signal like drive
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.signal == "SIGTERM"  # the handler ran (Python runs it before the next bytecode)
        return {"ok": True, "truncated": True, "stopped_by": stop.signal}

    monkeypatch.setattr(soak, "run", run)
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "soak.json"
    assert soak.main(["--count", "5", "--device", "cpu", "--no-progress", "--out", str(out)]) == 143
    assert json.loads(out.read_text())["stopped_by"] == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before  # restored


def test_a_tiny_budget_gives_a_truncated_valid_report_on_cpu():
    """The real sandbox stopped by its budget: one request (always at least one), its verdict earned, the
    client closed cleanly, no worker or temporary file left behind."""
    args = ["--count", "20", "--concurrency", "3", "--device", "cpu", "--no-progress", "--seed", "1",
            "--compile-timeout", "6", "--run-timeout", "6", "--budget-s", "1"]  # fmt: skip
    result = soak.run(soak.parse(args))
    assert result["violations"] == [] and result["ok"], result["violations"]
    assert result["truncated"] and result["stopped_by"] == "budget" and result["done"] == 1
    assert result["count"] == 20 and sum(c["count"] for c in result["categories"].values()) == 1
    assert all(c["earned"] == c["count"] for c in result["categories"].values())
    keys = ("date", "device", "versions", "wall_s", "verdicts_per_hour", "restarts", "categories")
    for key in (*keys, "time_split", "run_workers_per_gpu", "restart_s", "startup_s"):
        assert key in result
