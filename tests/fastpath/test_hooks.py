"""Build observers (``kernels_env.fastpath.hooks``): what the profiler's compile tool sees of a candidate's
fast-path builds, for successes (fresh and cached) and failures, with real nvcc and NVRTC."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels_env.fastpath import CompileError, cuda_library, nvrtc_kernel
from kernels_env.fastpath.hooks import observe_builds

from .support import RELU_CU

BAD_CU = "__global__ void k(float* x) {\n  x[0] = missing_value;\n}\n"


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_observer_sees_sources_flags_artifact_and_resources(fp_cache, build_only):
    with observe_builds() as builds:
        cuda_library({"relu.cu": RELU_CU}, name="relu")
        cuda_library({"relu.cu": RELU_CU}, name="relu")  # cache hit: still reported
    first, second = builds
    assert (first.kind, first.name, first.arch) == ("cuda_library", "relu", "sm_90")
    assert first.sources == {"relu.cu": RELU_CU} and not first.cache_hit and second.cache_hit
    assert first.artifact and first.artifact.endswith("lib.so") and "-lineinfo" in first.options
    (res,) = [r for r in first.resources if r.entry]
    assert res.name.endswith("relu_kernelPKfPfi") and res.registers > 0
    assert first.error is None and second.resources == first.resources
    with observe_builds() as later:
        pass
    assert later == []  # an observer only sees builds made inside its block


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_observer_sees_failures_with_user_file_names(fp_cache, build_only):
    with observe_builds() as builds, pytest.raises(CompileError):
        cuda_library({"bad.cu": BAD_CU}, name="bad")
    (ev,) = builds
    assert ev.artifact is None and isinstance(ev.error, CompileError)
    err = next(d for d in ev.diagnostics if d["severity"] == "error")
    assert (err["file"], err["line"]) == ("bad.cu", 2) and "missing_value" in err["message"]
    assert err["source"] == "x[0] = missing_value;"


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_observer_sees_nvrtc_builds(fp_cache, build_only):
    with observe_builds() as builds:
        nvrtc_kernel(RELU_CU.split("extern")[0], "relu_kernel")
        with pytest.raises(CompileError):
            nvrtc_kernel(BAD_CU, "k", filename="k.cu")
    ok, bad = builds
    assert ok.kind == "nvrtc_kernel" and ok.kernel == "relu_kernel" and ok.artifact.endswith("kernel.bin")
    assert ok.resources and ok.resources[0].registers > 0
    assert bad.error is not None and bad.diagnostics[0]["file"] == "k.cu" and bad.diagnostics[0]["line"] == 2


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_a_failing_observer_never_breaks_a_build(fp_cache, build_only, monkeypatch):
    from kernels_env.fastpath import hooks

    def broken(event):
        raise RuntimeError("observer bug")

    monkeypatch.setattr(hooks, "_observers", [broken])
    lib = cuda_library({"relu.cu": RELU_CU}, name="relu")
    assert lib.resource_usage


@pytest.mark.integration  # starts a subprocess (tests/_tiers.py)
def test_nvrtc_cubin_is_stored_whole(fp_cache, build_only):
    """CuPy's getCUBIN drops the image's last byte; the cached cubin must be a complete ELF (the SASS tools
    reject a truncated one): its program and section header tables end inside the file."""
    import struct

    with observe_builds() as builds:
        nvrtc_kernel(RELU_CU.split("extern")[0], "relu_kernel")
    data = Path(builds[0].artifact).read_bytes()
    assert data[:4] == b"\x7fELF"
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    assert phoff + phentsize * phnum <= len(data) and shoff + shentsize * shnum <= len(data)
