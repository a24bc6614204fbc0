"""Real nvcc / NVRTC builds on a machine without a GPU: cache behaviour, concurrency, diagnostics, modes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernels_env.fastpath import CompileError, cuda_library, nvrtc_kernel, workspace_library
from kernels_env.fastpath.cache import clean_stale, lookup
from kernels_env.fastpath.library import plan_library

from .support import RELU_CU, REPO


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


NO_GPU = pytest.mark.skipif(_has_cuda(), reason="checks the no-GPU path; this machine has a GPU")


def _compiles(spy) -> list[str]:
    return [c for c in spy.calls() if "-o" in c.split()]


def test_build_only_produces_cached_sm90_library(fp_cache, build_only, nvcc_spy):
    lib = cuda_library({"relu.cu": RELU_CU}, name="relu")
    assert not lib.loaded and "KERNELS_ENV_BUILD_ONLY=1" in lib.unloaded_reason
    so = Path(lib.path)
    assert so.is_file() and so.read_bytes()[:4] == b"\x7fELF" and so.is_relative_to(fp_cache)
    assert "relu_launch" in lib.exports and "kernels_env_fastpath_last_error" in lib.exports
    assert set(lib.functions) == {"relu_launch"}
    (res,) = lib.resource_usage
    assert res.arch == "sm_90" and res.registers > 0 and res.demangled.startswith("relu_kernel")
    assert lib.kernel_resources("relu_kernel") is res
    b = lib.build
    assert (
        not b.cache_hit and b.compile_seconds > 0 and b.built_seconds > 0 and b.seconds >= b.compile_seconds
    )
    assert b.toolchain.startswith("nvcc 13.") and "ptxas info" in b.log
    with pytest.raises(RuntimeError, match="built only"):
        lib.relu_launch(0, 0, 1)
    with pytest.raises(AttributeError, match="no extern \"C\" function 'relu'"):
        lib.relu  # noqa: B018
    # Only build outputs stay in the cache: no temporary dirs survive a successful build.
    assert list((fp_cache / "tmp").iterdir()) == []
    assert len(_compiles(nvcc_spy)) == 1


def test_cache_hit_in_a_new_process_runs_no_compiler(fp_cache, build_only, nvcc_spy):
    first = cuda_library({"relu.cu": RELU_CU})
    code = (
        "from kernels_env.fastpath import cuda_library\n"
        f"lib = cuda_library({{'relu.cu': {RELU_CU!r}}})\n"
        "print(lib.build.cache_hit, lib.build.compile_seconds, lib.path)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    hit, seconds, path = out.stdout.split()
    assert hit == "True" and float(seconds) == 0.0 and path == first.path
    assert len(_compiles(nvcc_spy)) == 1  # the second process only asked `nvcc --version`
    again = cuda_library({"relu.cu": RELU_CU})
    assert again.build.cache_hit and again.build.built_seconds == pytest.approx(first.build.built_seconds)


def test_key_depends_on_source_flags_arch_libraries_and_toolchain(fp_cache, nvcc_spy, monkeypatch):
    base = plan_library({"relu.cu": RELU_CU}).key
    assert plan_library({"relu.cu": RELU_CU}).key == base
    assert plan_library({"relu.cu": RELU_CU}, name="other").key == base  # a label, not an input
    variants = {
        "source": plan_library({"relu.cu": RELU_CU + "\n// edit\n"}).key,
        "file name": plan_library({"act.cu": RELU_CU}).key,
        "extra header": plan_library({"relu.cu": RELU_CU, "x.cuh": "#pragma once\n"}).key,
        "flags": plan_library({"relu.cu": RELU_CU}, extra_cuda_flags=["--use_fast_math"]).key,
        "opt level": plan_library({"relu.cu": RELU_CU}, extra_cuda_flags=["-O2"]).key,
        "arch arg": plan_library({"relu.cu": RELU_CU}, arch="sm_80").key,
        "library": plan_library({"relu.cu": RELU_CU}, libraries=["m"]).key,
    }
    monkeypatch.setenv("KERNELS_ENV_CUDA_ARCH", "sm_90a")
    variants["arch env"] = plan_library({"relu.cu": RELU_CU}).key
    monkeypatch.delenv("KERNELS_ENV_CUDA_ARCH")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-DFOO=1")
    variants["nvcc env"] = plan_library({"relu.cu": RELU_CU}).key
    monkeypatch.delenv("NVCC_APPEND_FLAGS")
    from kernels_env.fastpath import common

    monkeypatch.setattr(common, "FASTPATH_VERSION", "test-bump")
    monkeypatch.setattr("kernels_env.fastpath.library.FASTPATH_VERSION", "test-bump")
    variants["fastpath version"] = plan_library({"relu.cu": RELU_CU}).key
    monkeypatch.undo()
    # A toolchain upgrade: same nvcc path, different `nvcc --version`.
    monkeypatch.setenv("KERNELS_ENV_CACHE_DIR", str(fp_cache))
    monkeypatch.setenv("KERNELS_ENV_NVCC", nvcc_spy.path)
    from kernels_env.fastpath import toolchain

    toolchain._version_output.cache_clear()
    base_spy = plan_library({"relu.cu": RELU_CU}).key
    nvcc_spy.set_version("Cuda compilation tools, release 13.1, V13.1.0")
    toolchain._version_output.cache_clear()
    variants["toolchain"] = plan_library({"relu.cu": RELU_CU}).key
    toolchain._version_output.cache_clear()
    assert variants["toolchain"] != base_spy
    keys = list(variants.values())
    assert base not in keys and len(set(keys)) == len(keys), variants


def test_header_edit_changes_key_for_path_sources(tmp_path, fp_cache):
    src = tmp_path / "k.cu"
    src.write_text('#include "common.cuh"\n' + RELU_CU)
    (tmp_path / "common.cuh").write_text("#pragma once\n#define SCALE 1\n")
    before = plan_library(src).key
    (tmp_path / "common.cuh").write_text("#pragma once\n#define SCALE 2\n")
    assert plan_library(src).key != before


def test_arch_override_reaches_ptxas(fp_cache, build_only, monkeypatch):
    monkeypatch.setenv("KERNELS_ENV_CUDA_ARCH", "sm_80")
    lib = cuda_library({"relu.cu": RELU_CU})
    assert lib.build.arch == "sm_80" and {r.arch for r in lib.resource_usage} == {"sm_80"}


_CONCURRENT = textwrap.dedent(
    """
    import json, sys
    from kernels_env.fastpath import cuda_library
    lib = cuda_library({"relu.cu": sys.argv[1]})
    print(json.dumps({"hit": lib.build.cache_hit, "path": lib.path, "waited": lib.build.waited_seconds}))
    """
)


def test_concurrent_builds_of_one_key_compile_once(fp_cache, build_only, nvcc_spy):
    nvcc_spy.set_delay(1.5)  # every process is waiting on the lock while the first one compiles
    env = dict(os.environ)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CONCURRENT, RELU_CU], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert len(_compiles(nvcc_spy)) == 1
    assert sorted(r["hit"] for r in results) == [False, True, True, True]
    assert len({r["path"] for r in results}) == 1
    assert len(list((fp_cache / "entries").iterdir())) == 1
    assert lookup(fp_cache, Path(results[0]["path"]).parent.name) is not None


def test_killed_build_leaves_no_entry_and_does_not_block(fp_cache, build_only, nvcc_spy):
    nvcc_spy.set_delay(60)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CONCURRENT, RELU_CU], cwd=REPO, env=dict(os.environ), start_new_session=True
    )
    deadline = time.monotonic() + 60
    while not _compiles(nvcc_spy) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _compiles(nvcc_spy), "the build never started"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert list((fp_cache / "entries").iterdir()) == []
    nvcc_spy.set_delay(0)
    lib = cuda_library({"relu.cu": RELU_CU})  # the dead builder's lock is gone with it
    assert not lib.build.cache_hit and lib.build.waited_seconds < 5
    leftovers = list((fp_cache / "tmp").iterdir())
    assert leftovers  # the killed build's staging dir, harmless, until it is stale
    old = time.time() - 7 * 3600
    for p in leftovers:
        os.utime(p, (old, old))
    clean_stale(fp_cache)
    assert list((fp_cache / "tmp").iterdir()) == []


def test_compile_timeout_kills_the_compiler_tree(fp_cache, build_only, nvcc_spy, monkeypatch):
    import psutil

    monkeypatch.setenv("KERNELS_ENV_COMPILE_TIMEOUT", "2")
    nvcc_spy.set_delay(120)
    start = time.monotonic()
    with pytest.raises(CompileError, match="killed after the 2 s compile timeout"):
        cuda_library({"relu.cu": RELU_CU})
    assert time.monotonic() - start < 60
    pids = nvcc_spy.last_pids()
    assert len(pids) == 2

    def alive(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids), "the compiler's process tree survived the timeout"
    assert list((fp_cache / "entries").iterdir()) == []


def test_corrupted_entries_are_rebuilt(fp_cache, build_only, nvcc_spy):
    lib = cuda_library({"relu.cu": RELU_CU})
    so = Path(lib.path)
    so.write_bytes(so.read_bytes()[:100])  # truncated artifact
    again = cuda_library({"relu.cu": RELU_CU})
    assert not again.build.cache_hit and Path(again.path).stat().st_size > 100
    (Path(again.path).parent / "meta.json").write_text("{not json")
    third = cuda_library({"relu.cu": RELU_CU})
    assert not third.build.cache_hit
    assert cuda_library({"relu.cu": RELU_CU}).build.cache_hit
    assert len(_compiles(nvcc_spy)) == 3


def test_nvcc_diagnostics_name_user_files(fp_cache, build_only, tmp_path):
    broken = RELU_CU.replace("y[i] = x[i] > 0.f ? x[i] : 0.f;", "y[i] = undefined_thing;")
    with pytest.raises(CompileError) as info:
        cuda_library({"act/relu.cu": broken})
    err = info.value
    (d,) = [d for d in err.diagnostics if d["severity"] == "error"]
    line = broken.splitlines().index("  if (i < n) y[i] = undefined_thing;") + 1
    assert (d["file"], d["line"], d["column"]) == ("act/relu.cu", line, 21)
    assert "undefined_thing" in d["message"] and "act/relu.cu:" in str(err)
    assert str(fp_cache) not in err.log and "/tmp" not in json.dumps(err.diagnostics)
    assert list((fp_cache / "entries").iterdir()) == [] and list((fp_cache / "tmp").iterdir()) == []
    # A path source keeps the path the caller gave.
    path = tmp_path / "bad.cu"
    path.write_text(broken)
    with pytest.raises(CompileError) as info:
        cuda_library(str(path))
    assert info.value.diagnostics[0]["file"] == str(path)
    # Linker: a declared, never defined function is a build error, not a load-time surprise.
    with pytest.raises(CompileError, match="undefined reference to 'missing'"):
        cuda_library(
            {"l.cu": 'extern "C" int missing(int);\nextern "C" int f(int n) { return missing(n); }\n'}
        )


def test_nvcc_warnings_are_kept_on_success(fp_cache, build_only):
    src = RELU_CU.replace("int i = blockIdx", "int unused_var; int i = blockIdx")
    lib = cuda_library({"w.cu": src})
    (w,) = [d for d in lib.diagnostics if d["severity"] == "warning"]
    assert w["file"] == "w.cu" and "unused_var" in w["message"]


def test_missing_cuda_library_is_a_clear_compile_error(fp_cache, build_only, monkeypatch):
    monkeypatch.setattr("kernels_env.fastpath.toolchain.find_cuda_library", lambda name: None)
    with pytest.raises(CompileError, match="CUDA library 'cublas' not found"):
        cuda_library({"relu.cu": RELU_CU}, libraries=["cublas"])


@NO_GPU
def test_without_gpu_calls_raise_a_clear_error(fp_cache, monkeypatch):
    monkeypatch.delenv("KERNELS_ENV_BUILD_ONLY", raising=False)
    lib = cuda_library({"relu.cu": RELU_CU})
    assert not lib.loaded
    with pytest.raises(RuntimeError, match="no CUDA device is visible"):
        lib.relu_launch(0, 0, 1)
    k = nvrtc_kernel(RELU_CU.split('extern "C"')[0].replace("#include <cuda_runtime.h>", ""), "relu_kernel")
    with pytest.raises(RuntimeError, match="no CUDA device is visible"):
        k(1, 1, (0, 0, 1))


def test_workspace_library_builds_all_kernels(tmp_path, fp_cache, build_only):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "model_new.py").write_text("# ModelNew lives here\n")
    (ws / "kernels" / "common.cuh").write_text("#pragma once\n#define BLOCK 256\n")
    (ws / "kernels" / "relu.cu").write_text('#include "common.cuh"\n' + RELU_CU.replace("256", "BLOCK"))
    (ws / "kernels" / "scale.cu").write_text(
        '#include <cuda_runtime.h>\n#include "common.cuh"\n'
        "__global__ void scale_kernel(float* x, float a, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n"
        'extern "C" int scale_launch(float* x, float a, int n, cudaStream_t s) {\n'
        "  scale_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(x, a, n);\n"
        "  return (int)cudaGetLastError(); }\n"
    )
    lib = workspace_library(ws)
    assert set(lib.functions) == {"relu_launch", "scale_launch"} and lib.name == "ws"
    assert {r.demangled.split("(")[0] for r in lib.resource_usage} == {"relu_kernel", "scale_kernel"}
    assert workspace_library(ws).build.cache_hit
    (ws / "kernels" / "common.cuh").write_text("#pragma once\n#define BLOCK undefined_block\n")
    with pytest.raises(CompileError) as info:
        workspace_library(ws)
    files = {d["file"] for d in info.value.diagnostics if d["severity"] == "error"}
    assert files <= {"kernels/common.cuh", "kernels/relu.cu", "kernels/scale.cu"} and files
    with pytest.raises(FileNotFoundError):
        workspace_library(tmp_path / "empty")


def test_nvrtc_build_cache_and_template_names(fp_cache, build_only):
    src = (
        "template <typename T>\n__global__ void scale(T* x, T a, int n) {\n"
        "  int i = threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n"
    )
    k = nvrtc_kernel(src, "scale<float>")
    assert k.lowered_name.startswith("_Z5scaleIfEvPT_S0_i") and not k.build.cache_hit
    assert k.resource_usage is not None and k.resource_usage.registers > 0
    assert [s.kind for s in k.specs] == ["pointer", "opaque", "int"]
    again = nvrtc_kernel(src, "scale<float>")
    assert again.build.cache_hit and again.build.compile_seconds == 0.0
    assert nvrtc_kernel(src, "scale<double>").lowered_name != k.lowered_name
    assert not nvrtc_kernel(src, "scale<float>", options=["--use_fast_math"]).build.cache_hit
    assert not nvrtc_kernel(src, "scale<float>", arch="sm_80").build.cache_hit
    with pytest.raises(RuntimeError, match="built only"):
        k(1, 32, (0, 1.0, 4))


def test_nvrtc_diagnostics_and_missing_kernel(fp_cache, build_only):
    src = 'extern "C" __global__ void k(float* x) {\n  x[0] = y;\n}\n'
    with pytest.raises(CompileError) as info:
        nvrtc_kernel(src, "k", filename="mine.cu")
    (d,) = info.value.diagnostics
    assert (d["file"], d["line"], d["column"], d["tool"]) == ("mine.cu", 2, 10, "nvrtc")
    hdr = {"helpers.cuh": "#pragma once\n__device__ float twice(float v) {\n  return v * undefined_h;\n}\n"}
    with pytest.raises(CompileError) as info:
        nvrtc_kernel(
            '#include "helpers.cuh"\nextern "C" __global__ void k(float* x) { x[0] = twice(1.f); }\n',
            "k",
            headers=hdr,
        )
    assert info.value.diagnostics[0]["file"] == "helpers.cuh" and info.value.diagnostics[0]["line"] == 3
    with pytest.raises(CompileError, match="cannot find kernel 'nothere'") as info:
        nvrtc_kernel('extern "C" __global__ void k(float* x) { x[0] = 1; }\n', "nothere")
    assert "kernels found: k" in info.value.diagnostics[0]["message"]


SCALAR_CU = r"""
#include <cuda_runtime.h>
extern "C" int returns_code(int code) { return code; }
extern "C" double add_halves(double a, float b) { return a + b; }
extern "C" long long widen(unsigned int a, long long b) { return (long long)a + b; }
extern "C" void nothing(void) {}
typedef struct { int a, b; } pair_t;
extern "C" int by_value(pair_t p) { return p.a + p.b; }
"""


@NO_GPU
def test_ctypes_calls_through_a_loaded_library_without_gpu(fp_cache, monkeypatch):
    """The call machinery (argtypes, return codes, error strings) on a really loaded .so; only the
    post-call cudaGetLastError is stubbed, since without a driver it reports 'insufficient driver'."""
    import kernels_env.fastpath.library as library

    monkeypatch.delenv("KERNELS_ENV_BUILD_ONLY", raising=False)
    monkeypatch.setattr(library, "cuda_unavailable_reason", lambda: None)
    lib = cuda_library({"scalars.cu": SCALAR_CU})
    assert lib.loaded
    assert lib._last_error() == 35  # cudaErrorInsufficientDriver: the real runtime answered
    assert "insufficient" in lib.error_string(35)
    with pytest.raises(
        RuntimeError, match="CUDA error after scalars.nothing: CUDA driver version is insufficient"
    ):
        lib.nothing()
    monkeypatch.setattr(lib, "_last_error", lambda: 0)
    assert lib.returns_code(0) is None
    with pytest.raises(RuntimeError, match=r"scalars.returns_code returned error 2: out of memory"):
        lib.returns_code(2)
    with pytest.raises(RuntimeError, match="unrecognized error code"):
        lib.returns_code(1002)
    assert lib.add_halves(1.25, 2.5) == 3.75
    assert lib.widen(2**32 - 1, 2**40) == 2**32 - 1 + 2**40
    assert lib.nothing() is None
    with pytest.raises(OverflowError):
        lib.widen(-1, 0)
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        lib.widen(1)
    assert "add_halves" in dir(lib) and "double add_halves(double a, float b)" in lib.add_halves.__doc__
    with pytest.raises(TypeError, match="ctypes cannot pass"):
        lib.by_value(1)


def test_build_only_nvrtc_runs_in_a_fresh_process_and_fills_the_cache(fp_cache, tmp_path):
    """In build-only mode NVRTC never runs in the calling process (it crashed in the sandbox's forked compile
    children on the GPU image); the cubin it leaves in the cache is what an in-process build would make."""
    src = 'extern "C" __global__ void twice(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.f; }'
    code = (
        "import sys, json\n"
        "from kernels_env.fastpath import nvrtc_kernel\n"
        f"k = nvrtc_kernel({src!r}, 'twice')\n"
        "print(json.dumps({'in_process': 'cupy_backends.cuda.libs.nvrtc' in sys.modules,\n"
        "                  'hit': k.build.cache_hit, 'artifact': str(k.build.artifact)}))\n"
    )
    env = {**os.environ, "KERNELS_ENV_BUILD_ONLY": "1", "KERNELS_ENV_CACHE_DIR": str(fp_cache)}
    run = lambda: subprocess.run(  # noqa: E731
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=REPO
    )
    first = run()
    assert first.returncode == 0, first.stderr[-2000:]
    out = json.loads(first.stdout.strip().splitlines()[-1])
    assert out == {**out, "in_process": False, "hit": False}
    built = Path(out["artifact"]).read_bytes()
    assert built[:4] == b"\x7fELF"
    again = json.loads(run().stdout.strip().splitlines()[-1])
    assert again["hit"] and again["artifact"] == out["artifact"]
    from kernels_env.fastpath.nvrtc import compile_here, nvrtc_options

    image, fmt, _, _ = compile_here(src, "twice.cu", "twice", nvrtc_options("sm_90", []), {})
    assert fmt == "cubin" and len(image) == len(built)  # whole cubins, in-process or not
