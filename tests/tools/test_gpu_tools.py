"""The tools on a real GPU: bottleneck labels for a memory-bound and a compute-bound kernel (ncu), the cheap
mode, the sanitizer catching a planted OOB write / race / uninitialised read, Triton compile reports."""

from __future__ import annotations

import pytest
from conftest import PROBLEMS

from kernels_env.tools import run_tool
from kernels_env.tools._ncu import find_ncu
from kernels_env.tools._sanitizer import find_sanitizer

pytestmark = pytest.mark.gpu
needs_ncu = pytest.mark.skipif(find_ncu() is None, reason="needs Nsight Compute")
needs_sanitizer = pytest.mark.skipif(find_sanitizer() is None, reason="needs compute-sanitizer")


def _profile(sol, ref="ref_add.py", **kw):
    args = {"reference": str(PROBLEMS / ref), "solution": str(PROBLEMS / sol), **kw}
    resp = run_tool("profile", args, {"time_s": 120, "max_output_bytes": 200_000})
    assert resp["ok"], resp.get("error") or resp.get("text")
    return resp


def _label(resp, name):
    ks = [k for k in resp["result"]["candidate"]["kernels"] if name in k["name"]]
    assert ks, [k["name"] for k in resp["result"]["candidate"]["kernels"]]
    return ks[0]


@needs_ncu
def test_memory_bound_kernel_is_labelled_memory_bound():
    resp = _profile("sol_add_vec4.py", mode="ncu")
    k = _label(resp, "add_vec4")
    assert k["bottleneck"] == "memory-bound", (k["metrics"], k["evidence"])
    assert k["metrics"]["dram_pct"] > 60 and k["share_pct"] > 90
    ref = resp["result"]["reference"]["kernels"]
    assert ref and ref[0]["bottleneck"] == "memory-bound"  # eager a + b streams memory too
    assert resp["result"]["roofline"]["floor"]["bound"] == "memory"
    print(resp["text"])


@needs_ncu
def test_compute_bound_kernel_is_labelled_compute_bound():
    resp = _profile("sol_fma_heavy.py", mode="ncu", include_reference=False)
    k = _label(resp, "fma_heavy")
    assert k["bottleneck"] == "compute-bound", (k["metrics"], k["evidence"])
    assert k["metrics"]["sm_pct"] > 60 and k["metrics"]["dram_pct"] < 30
    print(resp["text"])


def test_events_mode_on_gpu():
    resp = _profile("sol_add_vec4.py", mode="events", iters=5)
    cand = resp["result"]["candidate"]
    assert any("add_vec4" in k["name"] for k in cand["kernels"]) and cand["forward_us"] > 0
    assert resp["result"]["roofline"]["ceilings"]["source"] == "measured"
    assert resp["result"]["roofline"]["candidate"]["x_above_floor"] > 0.5


def _sanitize(sol, tools):
    args = {"reference": str(PROBLEMS / "ref_small.py"), "solution": str(PROBLEMS / sol), "tools": tools}
    return run_tool("sanitize", args, {"time_s": 240, "max_output_bytes": 100_000})


@needs_sanitizer
def test_sanitizer_catches_planted_oob_write():
    resp = _sanitize("sol_oob.py", ["memcheck"])
    rep = resp["result"]["tools"]["memcheck"]
    assert not rep["clean"] and any(
        "write" in f["kind"] and "scale_oob" in (f["kernel"] or "") for f in rep["findings"]
    ), rep
    print(resp["text"])


@needs_sanitizer
def test_sanitizer_catches_planted_race():
    resp = _sanitize("sol_race.py", ["racecheck"])
    rep = resp["result"]["tools"]["racecheck"]
    assert not rep["clean"] and any("race" in f["kind"] for f in rep["findings"]), rep
    print(resp["text"])


@needs_sanitizer
def test_sanitizer_clean_kernel_is_clean():
    resp = _sanitize("sol_clean.py", ["memcheck"])
    assert resp["result"]["clean"], resp["text"]


def test_triton_compile_report_on_gpu():
    args = {
        "reference": str(PROBLEMS / "ref_small.py"),
        "solution": str(PROBLEMS / "sol_triton_add.py"),
        "sass": True,
    }
    resp = run_tool("compile", args, {"time_s": 120, "max_output_bytes": 100_000})
    tri = resp["result"]["triton"]
    assert tri["functions"] == ["scale_kernel"] and tri["kernels"], tri
    k = tri["kernels"][0]
    assert (k.get("n_regs") or k["ptxas"]["registers"]) > 0 and k["num_warps"] >= 1
    print(resp["text"])
