"""The race probe's decisions (``kernels_env.judge.assemble.race_probe``): which verdicts get
compute-sanitizer racecheck, and what its report does to the verdict. Pure functions of the verdict and the
sanitize tool's response; the sanitizer itself runs on a GPU (red-team ``shared_memory_race_cupy``, gpu)."""

from __future__ import annotations

import pytest

from kernels_env.judge.assemble import result as assemble
from kernels_env.judge.assemble.race_probe import SHARED_MEMORY_RACE, apply_probe, wants_probe
from kernels_env.rules.config import JudgeConfig
from kernels_env.rules.protocols import resolve
from kernels_env.tools._sanitizer import parse_sanitizer

# racecheck's text for the attack's kernel (the format _sanitizer parses; a hazard between two lanes).
RACY_LOG = """========= Error: Race reported between Write access at relu_swap(float*)+0x1b0 in relu.cu:6
=========     and Read access at relu_swap(float*)+0x1f0 in relu.cu:8 [1024 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
CLEAN_LOG = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"


def verdict(status="correct", speedups=None):
    return {"status": status, "check": None, "error": None, "evidence": None, "messages": [],
            "speedups": {"eager": 1.5, "compile": 1.2} if speedups is None else speedups}  # fmt: skip


def response(log: str | None, ok: bool = True, error: str | None = None) -> dict:
    tools = {"racecheck": {**parse_sanitizer(log, "racecheck"), "elapsed_s": 7.5}} if log else {}
    return {"ok": ok, "error": error, "result": {"tools": tools} if log else None}


CUDA = {"device": "cuda", "race_check": "top_tier"}


def test_the_top_tier_is_probed_and_nothing_else_by_default():
    assert wants_probe(verdict(), CUDA)  # >5% faster than every baseline
    assert not wants_probe(verdict(speedups={"eager": 1.5, "compile": 1.04}), CUDA)  # not faster than one
    assert not wants_probe(verdict(speedups={"eager": None}), CUDA)  # not measured: never "faster"
    assert not wants_probe(verdict(status="incorrect"), CUDA)
    assert not wants_probe(verdict(), {**CUDA, "device": "cpu"})  # CPU mode: no sanitizer
    assert not wants_probe(verdict(), {**CUDA, "race_check": "off"})
    assert wants_probe(verdict(speedups={}), {**CUDA, "race_check": "always"})


def test_a_reported_race_rejects_the_verdict_with_its_findings():
    result = verdict()
    apply_probe(result, response(RACY_LOG))
    assert result["status"] == "rejected" and result["check"] == SHARED_MEMORY_RACE
    assert result["race_probe"] == {"status": "ran", "clean": False, "hazards": 1, "elapsed_s": 7.5}
    found = result["evidence"]["findings"][0]
    assert (found["file"], found["line"], found["other"]["line"]) == ("relu.cu", 6, 8)
    assert "relu.cu:6" in result["error"]
    assemble.add_reward(result, "cuda_agent")
    assert result["reward"] == -1.0  # the tier it would have had (3) is gone


def test_a_clean_probe_keeps_the_verdict_and_says_so():
    result = verdict()
    apply_probe(result, response(CLEAN_LOG))
    assert result["status"] == "correct" and result["check"] is None
    assert result["race_probe"] == {"status": "ran", "clean": True, "hazards": 0, "elapsed_s": 7.5}


def test_racecheck_warnings_are_not_races():
    warning = RACY_LOG.replace("Error: Race", "Warning: Race").replace(
        "(1 error, 0 warnings)", "(0 errors, 1 warning)"
    )
    result = verdict()
    apply_probe(result, response(warning))
    assert result["status"] == "correct" and result["race_probe"]["hazards"] == 0


def test_without_a_sanitizer_the_probe_is_unavailable_and_the_verdict_stands():
    result = verdict()
    why = "sanitize needs a CUDA GPU and compute-sanitizer (PATH or /usr/local/cuda/bin)"
    apply_probe(result, response(None, ok=False, error=why))
    assert result["status"] == "correct"
    assert (
        result["race_probe"]["status"] == "unavailable"
        and "compute-sanitizer" in result["race_probe"]["reason"]
    )
    assert any(m["kind"] == "note" and "race probe not run" in m["text"] for m in result["messages"])


def test_race_check_setting_is_validated_and_recorded():
    assert resolve(JudgeConfig(race_check="always"), "cpu")["race_check"] == "always"
    assert resolve(JudgeConfig(), "cpu")["race_check"] == "top_tier"
    with pytest.raises(ValueError, match="race_check"):
        resolve(JudgeConfig(race_check="sometimes"), "cpu")


def test_a_probed_verdict_follows_the_result_schema_and_older_records_still_read():
    """The probe's record is a schema field (a GPU run found ``validate`` refusing the unknown key); records
    written before it existed read with ``race_probe`` None."""
    from kernels_env.rules.result import Result, new_result, validate

    result = new_result(status="correct", stage="done")
    apply_probe(result, response(RACY_LOG))
    validate(result)
    assert Result.from_dict(result).race_probe["hazards"] == 1
    older = new_result(status="correct", stage="done")
    del older["race_probe"]
    assert Result.from_dict(older).race_probe is None
    with pytest.raises(ValueError, match="lacks keys"):
        Result.from_dict({k: v for k, v in older.items() if k != "stage"})
