"""Each stage's reply read on the caller's side (``kernels_env.judge.assemble.replies``), in-process: what the
client makes of a run worker's reply, a retried failure, a baselines reply and the GPU-lock seconds. The
run worker's reply came from a process that ran candidate code, so every shape is checked here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernels_env.judge.assemble import replies
from kernels_env.judge.assemble import result as assemble
from kernels_env.rules.result import CORRECT, JUDGE_ERROR, REJECTED, RUNTIME_ERROR, TOOLCHAIN_MISSING


def _notes(report: dict) -> list[str]:
    return [m["text"] for m in report.get("messages", []) if m["kind"] == "note"]


def test_a_run_reply_moves_phases_and_lock_seconds_into_durations():
    durations = {"gpu_wait": 0.5}
    payload = {"status": CORRECT, "phases_s": {"trials": 1.0}, "gpu_lock_s": {"wait": 0.25, "exclusive": 2}}
    report = replies.run_reply(payload, False, durations, None)
    assert report is payload and "phases_s" not in report and "gpu_lock_s" not in report
    assert durations == {"gpu_wait": 0.75, "gpu_exclusive": 2.0, "run_phases": {"trials": 1.0}}
    assert _notes(report) == []


@pytest.mark.parametrize("payload", [["not", "a", "dict"], "text", None])
def test_a_run_reply_that_is_not_a_dict_is_the_judges_failure(payload):
    report = replies.run_reply(payload, False, {}, None)
    assert report["status"] == JUDGE_ERROR and type(payload).__name__ in report["error"]


def test_a_harness_error_is_a_judge_error_with_its_last_line_and_trace():
    trace = "Traceback (most recent call last):\n  File x\nKeyError: 'boom'\n"
    report = replies.run_reply({"harness_error": trace}, False, {}, None)
    assert report["status"] == JUDGE_ERROR and report["error"].endswith("KeyError: 'boom'")
    assert any(m["text"] == trace for m in report["messages"])


def test_a_replaced_worker_is_noted_and_a_late_device_error_makes_correct_a_runtime_error():
    tampered = replies.run_reply({"status": CORRECT}, True, {}, None)
    assert tampered["status"] == CORRECT and "tampered" in _notes(tampered)[0]
    faulted = replies.run_reply({"status": CORRECT, "device_error": "illegal address"}, True, {}, None)
    assert faulted["status"] == RUNTIME_ERROR and "illegal address" in faulted["error"]
    assert "left unusable (illegal address)" in _notes(faulted)[0]
    rejected = replies.run_reply({"status": REJECTED, "device_error": "x"}, True, {}, None)
    assert rejected["status"] == REJECTED  # only a correct verdict is overturned by a fault after it


def test_the_memory_retry_is_noted_on_the_verdict_and_on_a_second_failure():
    report = replies.run_reply({"status": CORRECT}, False, {}, "killed at 4 GiB")
    assert "killed in the judge's code (killed at 4 GiB)" in _notes(report)[0]
    failure = SimpleNamespace(kind="memory", detail="killed again", evidence={"owner": "judge"}, log_tail="")
    again = replies.retried_failure(assemble.worker_failure(failure, "trials"), "killed at 4 GiB")
    assert again["status"] == JUDGE_ERROR and again["error"].endswith("(first attempt: killed at 4 GiB)")
    crash = SimpleNamespace(kind="crash", detail="segfault", evidence={}, log_tail="")
    own = replies.retried_failure(assemble.worker_failure(crash, "trials"), "killed at 4 GiB")
    assert own["status"] == RUNTIME_ERROR and "first attempt" not in own["error"]


def test_a_baselines_reply_says_whose_failure_it_is():
    ok = replies.baselines_reply({"baselines": {"eager": {"median_ms": 1.0}}, "comparable": True}, "ref.py")
    assert ok == {"baselines": {"eager": {"median_ms": 1.0}}, "comparable": True}
    assert replies.baselines_reply({"baselines": {}, "comparable": "yes"}, "r")["comparable"] is False
    assert replies.baselines_reply({"problem_error": "no Model"}, "ref.py") == (
        "reference",
        "baselines of ref.py: no Model",
    )
    whose, error = replies.baselines_reply({"harness_error": "Trace\nValueError: x\n"}, "ref.py")
    assert whose == "judge" and error.endswith("the judge failed: ValueError: x")
    assert replies.baselines_reply({"baselines": "forged"}, "r")[0] == "judge"
    assert replies.baselines_reply(["forged"], "r")[0] == "judge"


def test_lock_seconds_ignore_what_is_not_a_number():
    durations: dict = {}
    replies.lock_durations({"wait": "1", "exclusive": None}, durations)
    replies.lock_durations("forged", durations)
    assert durations == {}


def test_the_compile_report_is_screened_before_the_candidate_is_blamed():
    assert replies.screen_compile(["x"])["status"] == JUDGE_ERROR
    assert replies.screen_compile({"problem_error": "bad"}) == {"problem_error": "bad", "stage": "compile"}
    assert replies.screen_compile({"judge_error": "boom"})["status"] == JUDGE_ERROR
    missing = replies.screen_compile({"toolchain_missing": ["tilelang"], "backends": ["tilelang"]})
    assert missing["status"] == TOOLCHAIN_MISSING
    assert replies.screen_compile({"status": CORRECT})["status"] == REJECTED  # not a compile-stage status
    assert replies.screen_compile({"status": "ok"}) == {"status": "ok"}
