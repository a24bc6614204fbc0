"""The tools on a real GPU, through the real sandbox client (a CUDA run worker hosts profile, sanitize and
Triton compile reports; the candidates' fast-path kernels are built by the compile stage first): bottleneck
labels for a memory-bound and a compute-bound kernel (ncu), the cheap mode, the sanitizer catching a planted
out-of-bounds write / race / uninitialised read, a Triton compile report."""

from __future__ import annotations

import pytest
from tools_fixtures import PROBLEMS

from kernels_env.client import SandboxClient
from kernels_env.rules.config import SandboxConfig
from kernels_env.tools._ncu import find_ncu
from kernels_env.tools._sanitizer import find_sanitizer

pytestmark = pytest.mark.gpu
needs_ncu = pytest.mark.skipif(find_ncu() is None, reason="needs Nsight Compute")
needs_sanitizer = pytest.mark.skipif(find_sanitizer() is None, reason="needs compute-sanitizer")


@pytest.fixture(scope="module")
def gpu_client(tmp_path_factory):
    config = SandboxConfig(
        device="cuda",
        cache_dir=str(tmp_path_factory.mktemp("gpu_tools_cache")),
        num_compile_workers=2,
        standby_run_workers=False,
    )
    with SandboxClient(config) as sb:
        yield sb


def _profile(sb, sol, ref="ref_add.py", **kw):
    args = {"reference": str(PROBLEMS / ref), "solution": str(PROBLEMS / sol), **kw}
    resp = sb.tool("profile", args, {"time_s": 120, "max_output_bytes": 200_000})
    print(resp["text"])
    assert resp["ok"], resp.get("error") or resp.get("text")
    return resp


def _kernel(resp, name):
    ks = [k for k in resp["result"]["candidate"]["kernels"] if name in k["name"]]
    assert ks, [k["name"] for k in resp["result"]["candidate"]["kernels"]]
    return ks[0]


@needs_ncu
def test_memory_bound_kernel_is_labelled_memory_bound(gpu_client):
    resp = _profile(gpu_client, "sol_add_vec4.py", mode="ncu")
    k = _kernel(resp, "add_vec4")
    assert k["bottleneck"] == "memory-bound", (k["metrics"], k["evidence"])
    assert k["metrics"]["dram_pct"] > 60 and k["share_pct"] > 90
    ref = resp["result"]["reference"]["kernels"]
    assert ref and ref[0]["bottleneck"] == "memory-bound"  # eager a + b streams memory too
    assert resp["result"]["roofline"]["floor"]["bound"] == "memory"
    assert resp["elapsed_s"] < 60, resp["elapsed_s"]


@needs_ncu
def test_compute_bound_kernel_is_labelled_compute_bound(gpu_client):
    resp = _profile(gpu_client, "sol_fma_heavy.py", mode="ncu", include_reference=False)
    k = _kernel(resp, "fma_heavy")
    assert k["bottleneck"] == "compute-bound", (k["metrics"], k["evidence"])
    assert k["metrics"]["sm_pct"] > 60 and k["metrics"]["dram_pct"] < 30


def test_events_mode_on_gpu(gpu_client):
    resp = _profile(gpu_client, "sol_add_vec4.py", mode="events", iters=5)
    cand = resp["result"]["candidate"]
    assert any("add_vec4" in k["name"] for k in cand["kernels"]) and cand["forward_us"] > 0
    assert resp["result"]["roofline"]["ceilings"]["source"] == "measured"
    assert resp["result"]["roofline"]["candidate"]["x_above_floor"] > 0.5


def _sanitize(sb, sol, tools):
    args = {"reference": str(PROBLEMS / "ref_small.py"), "solution": str(PROBLEMS / sol), "tools": tools}
    resp = sb.tool("sanitize", args, {"time_s": 240, "max_output_bytes": 100_000})
    print(resp["text"])
    assert resp["result"] is not None, resp["error"]
    return resp


@needs_sanitizer
def test_sanitizer_catches_planted_oob_write(gpu_client):
    rep = _sanitize(gpu_client, "sol_oob.py", ["memcheck"])["result"]["tools"]["memcheck"]
    assert not rep["clean"] and any(
        "write" in f["kind"] and "scale_oob" in (f["kernel"] or "") for f in rep["findings"]
    ), rep


@needs_sanitizer
def test_sanitizer_catches_planted_race_and_uninitialised_read(gpu_client):
    rep = _sanitize(gpu_client, "sol_race.py", ["racecheck"])["result"]["tools"]["racecheck"]
    assert not rep["clean"] and any("race" in f["kind"] for f in rep["findings"]), rep
    rep = _sanitize(gpu_client, "sol_uninit.py", ["initcheck"])["result"]["tools"]["initcheck"]
    assert not rep["clean"] and any(f["kind"] == "uninitialized read" for f in rep["findings"]), rep


@needs_sanitizer
def test_sanitizer_clean_kernel_is_clean(gpu_client):
    resp = _sanitize(gpu_client, "sol_clean.py", ["memcheck", "racecheck", "initcheck"])
    assert resp["ok"] and resp["result"]["clean"], resp["text"]


def test_triton_compile_report_on_gpu(gpu_client):
    args = {
        "reference": str(PROBLEMS / "ref_small.py"),
        "solution": str(PROBLEMS / "sol_triton_add.py"),
        "sass": True,
    }
    resp = gpu_client.tool("compile", args, {"time_s": 120, "max_output_bytes": 100_000})
    print(resp["text"])
    tri = resp["result"]["triton"]
    assert tri["functions"] == ["scale_kernel"] and tri["kernels"], tri
    k = tri["kernels"][0]
    assert (k.get("n_regs") or k["ptxas"]["registers"]) > 0 and k["num_warps"] >= 1


def test_compile_of_a_fastpath_candidate_on_gpu_machine(gpu_client):
    """CUDA compile reports run on a compile worker (GPU hidden) with the GPU's architecture."""
    args = {"solution": str(PROBLEMS / "sol_add_vec4.py"), "sass": True}
    resp = gpu_client.tool("compile", args)
    print(resp["text"])
    assert resp["ok"] and resp["result"]["arch"].startswith("sm_")
    (k,) = resp["result"]["kernels"]
    assert k["short_name"] == "add_vec4" and k["registers"] > 0
    if k.get("sass"):
        assert k["sass"]["global_loads_by_width"].get("128")
