"""ptxas resource parsing and compiler diagnostics, on real nvcc 13.0 / NVRTC 13.0 output (fixtures/)."""

from __future__ import annotations

import pickle

import pytest

from kernels_env.fastpath.diagnostics import (
    CompileError,
    KernelResources,
    demangle,
    parse_diagnostics,
    parse_ptxas_resources,
    truncate_log,
)

from .support import FIXTURES


def _by_name(records):
    return {(r.name, r.arch): r for r in records}


def test_ptxas_sm90_entries_and_device_functions():
    recs = _by_name(parse_ptxas_resources((FIXTURES / "ptxas_sm90.txt").read_text()))
    softmax = recs[("_Z14softmax_kernelILi256EEvPKfPfi", "sm_90")]
    assert (softmax.registers, softmax.barriers, softmax.shared_bytes) == (30, 1, 1024)
    assert softmax.entry and softmax.stack_frame_bytes == 0 and not softmax.spills
    spill = recs[("_Z12spill_kernelPKfPfi", "sm_90")]
    assert (spill.registers, spill.stack_frame_bytes) == (32, 3176)
    assert (spill.spill_stores_bytes, spill.spill_loads_bytes) == (6904, 7384) and spill.spills
    assert spill.cumulative_stack_bytes == 3176
    stack = recs[("_Z12stack_kernelPKfPfii", "sm_90")]
    assert (stack.stack_frame_bytes, stack.spill_stores_bytes) == (256, 0)
    half = recs[("_Z11half_kernelPK6__halfPS_i", "sm_90")]
    assert (half.registers, half.stack_frame_bytes) == (20, 32)
    helper = recs[("_Z6helperf", "sm_90")]  # a __noinline__ device function: stack only
    assert not helper.entry and helper.registers is None
    assert half.compile_ms is not None and half.compile_ms > 0
    assert sum(r.entry for r in recs.values()) == 4
    assert all(r.constant_bytes == {} for r in recs.values())  # nvcc 13 prints no cmem for sm_90


def test_ptxas_sm80_reports_constant_banks():
    recs = _by_name(parse_ptxas_resources((FIXTURES / "ptxas_sm80_cmem.txt").read_text()))
    half = recs[("_Z11half_kernelPK6__halfPS_i", "sm_80")]
    assert half.constant_bytes == {0: 372, 2: 8}
    stack = recs[("_Z12stack_kernelPKfPfii", "sm_80")]
    assert stack.constant_bytes == {0: 376}
    spill = recs[("_Z12spill_kernelPKfPfi", "sm_80")]
    assert (spill.stack_frame_bytes, spill.spill_stores_bytes, spill.spill_loads_bytes) == (3184, 6908, 7388)


def test_ptxas_multiarch_keeps_one_record_per_arch():
    recs = _by_name(parse_ptxas_resources((FIXTURES / "ptxas_multiarch.txt").read_text()))
    name = "_Z14softmax_kernelILi256EEvPKfPfi"
    assert {a for (n, a) in recs if n == name} == {"sm_80", "sm_90"}
    assert recs[(name, "sm_80")].constant_bytes == {0: 372}
    assert recs[(name, "sm_90")].constant_bytes == {}


def test_ptxas_nvrtc_log_format():
    """NVRTC prefixes the stack line with 'ptxas         .'."""
    recs = _by_name(parse_ptxas_resources((FIXTURES / "ptxas_nvrtc_sm90.txt").read_text()))
    spill = recs[("_Z12spill_kernelPKfPfi", "sm_90")]
    assert spill.stack_frame_bytes > 0 and spill.spill_stores_bytes > 0
    assert recs[("_Z14softmax_kernelILi256EEvPKfPfi", "sm_90")].shared_bytes == 1024


def test_ptxas_maxrregcount_and_warnings_do_not_confuse_the_parser():
    text = (FIXTURES / "ptxas_sm90_maxreg_warn.txt").read_text()
    recs = _by_name(parse_ptxas_resources(text))
    assert recs[("_Z14softmax_kernelILi256EEvPKfPfi", "sm_90")].registers == 30
    assert all(r.registers <= 32 for r in recs.values() if r.entry)
    warnings = parse_diagnostics(text)
    assert any("spill" in d["message"] for d in warnings)
    assert all(d["severity"] == "warning" and d["tool"] == "ptxas" for d in warnings)


def test_ptxas_error_is_a_diagnostic_and_usage_still_parsed():
    text = (FIXTURES / "ptxas_error_smem.txt").read_text()
    (err,) = [d for d in parse_diagnostics(text) if d["severity"] == "error"]
    assert err["tool"] == "ptxas" and "too much shared data" in err["message"]
    (rec,) = parse_ptxas_resources(text)
    assert rec.shared_bytes == 240000


def test_resources_roundtrip_and_garbage():
    (rec,) = [r for r in parse_ptxas_resources((FIXTURES / "ptxas_sm80_cmem.txt").read_text()) if r.entry][:1]
    assert KernelResources.from_dict(rec.to_dict()) == rec
    assert parse_ptxas_resources("") == []
    assert parse_ptxas_resources("ptxas info    : Used 12 registers\nrandom\n") == []  # no entry line
    assert (
        parse_ptxas_resources(
            "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
            "ptxas info    : Used banana registers\n"
        )[0].registers
        is None
    )


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_demangle_names():
    out = demangle(["_Z11relu_kernelPKfPfi", "plain_c_name"])
    assert out["plain_c_name"] == "plain_c_name"
    assert out["_Z11relu_kernelPKfPfi"] in ("relu_kernel(float const*, float*, int)", "_Z11relu_kernelPKfPfi")


def _diags(name):
    return parse_diagnostics((FIXTURES / "errors" / f"{name}.nvcc.txt").read_text())


def test_edg_errors_with_columns():
    d = _diags("fe")
    assert [(x["file"], x["line"], x["column"]) for x in d] == [("fe.cu", 4, 10), ("fe.cu", 9, 10)]
    assert d[0]["message"] == 'identifier "y" is undefined' and d[0]["severity"] == "error"


def test_edg_column_maps_through_host_rewrite():
    """EDG echoes `__global__` as `__attribute__((global))`; the column must refer to the user's line."""
    src = (FIXTURES / "errors" / "ovl.cu").read_text()
    d = parse_diagnostics((FIXTURES / "errors" / "ovl.nvcc.txt").read_text(), sources={"ovl.cu": src})
    line = src.splitlines()[3]
    assert d[0]["line"] == 4 and line[d[0]["column"] - 1 :].startswith("x); }")
    assert "instantiation" in d[0]["context"][0]
    # Without the source the column cannot be trusted, so it is not guessed wrongly either.
    raw = _diags("ovl")
    assert raw[0]["column"] is None or raw[0]["column"] == d[0]["column"]


def test_warning_with_code_and_no_noise():
    (w,) = _diags("warn")
    assert (w["severity"], w["code"], w["line"]) == ("warning", "177-D", 2)


def test_host_compiler_assembler_linker_and_header_errors():
    (p,) = _diags("perr")
    assert (p["file"], p["line"], p["column"], p["tool"]) == ("perr.cu", 3, 2, "host")
    (a,) = _diags("asm")
    assert (a["file"], a["line"], a["severity"]) == ("asm.cu", 2, "error")
    (ld,) = _diags("link")
    assert ld["file"] is None and ld["message"] == "undefined reference to 'missing'" and ld["tool"] == "ld"
    (h,) = _diags("hdr")
    assert (h["file"], h["line"]) == ("sub/h.cuh", 2)
    (i,) = _diags("inc")
    assert (i["file"], i["line"], i["column"]) == ("inc.cu", 2, 10) and "nothere.h" in i["message"]


def test_path_map_renames_files():
    text = "/tmp/build-123/relu.cu(3): error: bad\n  x\n  ^\n"
    (d,) = parse_diagnostics(text, path_map={"/tmp/build-123/": ""})
    assert d["file"] == "relu.cu"


def test_compile_error_summary_pickle_and_truncation():
    diags = _diags("fe")
    err = CompileError("nvcc failed to build 'fe'", diags, "x" * 50_000)
    text = str(err)
    assert text.startswith("nvcc failed to build 'fe': 2 error(s)") and "fe.cu:4:10" in text
    assert len(err.log) < 21_000 and "characters truncated" in err.log
    back = pickle.loads(pickle.dumps(err))
    assert isinstance(back, CompileError) and back.diagnostics == err.diagnostics and str(back) == text
    assert isinstance(err, RuntimeError)
    bare = CompileError("failed", [], "line one\nfinal words\n")
    assert "final words" in str(bare)
    assert truncate_log("short") == "short"
