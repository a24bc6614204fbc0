"""compute-sanitizer report parsing (documented layouts; real outputs once unpacked)."""

from __future__ import annotations

import pytest
from tools_fixtures import FIXTURES, REAL, needs_real

from kernels_env.tools._sanitizer import parse_sanitizer, sanitizer_command

DOC = FIXTURES / "documented"


def test_memcheck_dedups_oob_writes_and_keeps_api_error():
    r = parse_sanitizer((DOC / "sanitizer_memcheck.txt").read_text(), "memcheck")
    assert r["completed"] and r["error_count"] == 33 and r["summary"]["not_printed"] == 30 and not r["clean"]
    oob = r["findings"][0]
    assert oob["kind"] == "invalid __global__ write" and oob["count"] == 2
    assert (oob["kernel"], oob["file"], oob["line"]) == ("scale_oob", "/tmp/nvrtc/scale_oob.cu", 4)
    assert oob["thread"] == [0, 0, 0] and oob["block"] == [16, 0, 0] and oob["address_is"] == "out of bounds"
    assert oob["nearest_allocation"] == {
        "offset_bytes": 1,
        "side": "after",
        "address": "0x7f1a2c000000",
        "size_bytes": 16384,
    }
    assert any(f["kind"] == "CUDA API error" for f in r["findings"])


def test_racecheck_pairs_both_sides():
    r = parse_sanitizer((DOC / "sanitizer_racecheck.txt").read_text(), "racecheck")
    (f,) = r["findings"]
    assert r["error_count"] == 1 and f["hazards"] == 7936 and f["kernel"] == "reverse_race"
    assert (f["line"], f["other"]["line"], f["other"]["access"]) == (5, 7, "Read")


def test_initcheck_location_variant_and_interleaved_app_output():
    r = parse_sanitizer((DOC / "sanitizer_initcheck.txt").read_text(), "initcheck")
    (f,) = r["findings"]
    assert f["kind"] == "uninitialized read" and (f["file"], f["line"], f["kernel"]) == (
        "add_scratch.cu",
        4,
        "add_scratch",
    )


def test_clean_and_incomplete():
    assert parse_sanitizer((DOC / "sanitizer_clean.txt").read_text())["clean"]
    r = parse_sanitizer("========= COMPUTE-SANITIZER\n")  # killed before its summary
    assert not r["completed"] and not r["clean"]


def test_command():
    cmd = sanitizer_command("cs", "racecheck", ["python", "x.py"], "/tmp/l", kernel_substring="rev")
    assert cmd[:3] == ["cs", "--tool", "racecheck"] and "kns=rev" in cmd and cmd[-2:] == ["python", "x.py"]


@needs_real
def test_real_sanitizer_outputs():
    def rep(name, tool):
        return parse_sanitizer((REAL / name).read_text(errors="replace"), tool)

    for name in ("sanitizer_memcheck_oob.log", "sanitizer_memcheck_oob_kns.log"):
        oob = rep(name, "memcheck")
        (f,) = [f for f in oob["findings"] if f["severity"] == "error"]
        assert oob["completed"] and not oob["clean"] and oob["error_count"] == 34
        assert (f["kind"], f["kernel"], f["line"], f["count"]) == (
            "invalid __global__ write",
            "scale_oob",
            4,
            20,
        )
        assert f["file"].endswith(".cu") and f["block"] == [16, 0, 0] and f["access_bytes"] == 4
        assert f["nearest_allocation"]["side"] == "after" and f["nearest_allocation"]["size_bytes"] == 16384
        assert oob["summary"]["not_printed"] == 14
    race = rep("sanitizer_racecheck_race.log", "racecheck")
    (f,) = race["findings"]
    assert race["completed"] and race["error_count"] == 1 and f["kernel"] == "reverse_race"
    assert (f["kind"], f["line"], f["other"]["line"], f["hazards"]) == (
        "shared-memory race: Write vs Read",
        5,
        7,
        16384,
    )
    init = rep("sanitizer_initcheck_uninit.log", "initcheck")
    (f,) = init["findings"]
    assert (
        init["completed"]
        and f["kind"] == "uninitialized read"
        and (f["kernel"], f["line"]) == ("add_scratch", 4)
    )
    assert init["summary"]["skipped"] == 3840 and init["summary"]["not_printed"] == 236
    for tool in ("memcheck", "racecheck", "initcheck"):
        clean = rep(f"sanitizer_{tool}_clean.log", tool)
        assert clean["clean"] and clean["completed"] and not clean["findings"], tool


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
@needs_real
def test_real_findings_point_at_the_candidates_python_lines():
    """The sanitizer names the kernel source (``<sha1>.cubin.cu:5`` from CuPy, ``reverse_race.cu:5`` from the
    fast path); the tool maps it to the line of the string in the solution the agent edits."""
    from tools_fixtures import PROBLEMS

    from kernels_env.tools._candidate import resolve_candidate
    from kernels_env.tools._capture import capture, source_locator
    from kernels_env.tools._sanitize import _to_python_lines

    race = parse_sanitizer((REAL / "sanitizer_racecheck_race.log").read_text(), "racecheck")
    c = resolve_candidate(PROBLEMS / "sol_race.py")
    locate = source_locator(capture(c), c.python_files())
    (f,) = race["findings"]
    _to_python_lines(f, locate)
    lines = (PROBLEMS / "sol_race.py").read_text().splitlines()
    assert (f["file"], f["unit_line"], f["other"]["file"]) == ("sol_race.py", 5, "sol_race.py")
    assert lines[f["line"] - 1].strip().startswith("buf[t] = ")
    assert lines[f["other"]["line"] - 1].strip() == "float v = buf[255 - t];"
    named = {"file": "reverse_race.cu", "line": 7, "kernel": "reverse_race"}  # the fast path's own file name
    _to_python_lines(named, locate)
    assert named["file"] == "sol_race.py" and named["line"] == f["other"]["line"]
    elsewhere = {"file": "other.cu", "line": 3, "kernel": "unknown_kernel"}
    _to_python_lines(elsewhere, locate)
    assert elsewhere == {"file": "other.cu", "line": 3, "kernel": "unknown_kernel"}
