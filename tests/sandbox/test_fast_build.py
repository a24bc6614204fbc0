"""The fast build path of load_inline builds (kernels_env/judge/build/fast_build.py): output-neutral GCC flags
where both compilers are GCC, plain builds where the candidate picks the host compiler, the first build's
choice kept, the plain fallback when the flags made the build fail (and only then), the path in each build's
record; with real g++ builds, that the fallback works and the objects are the same (slow: a CUDA
extension, nvcc over torch/extension.h, built both ways)."""

from __future__ import annotations

import functools
import inspect
import re
import shutil
from pathlib import Path

import pytest
import torch.utils.cpp_extension as ce

from kernels_env.judge.assemble import result as assemble
from kernels_env.judge.build import cache, fast_build, hooks, lean_headers, pch

GCC_FLAGS = list(fast_build.FLAGS)
CUDA_FLAGS = list(fast_build.CUDA_FLAGS)


@pytest.fixture
def hooked(tmp_path, monkeypatch):
    """The compile stage's build hooks and content-keyed wrapper around a fake torch load_inline that
    records its keyword arguments (``fail`` makes the next calls raise); torch's functions are restored."""
    calls: list[dict] = []
    fail: list[Exception] = []

    @functools.wraps(inspect.unwrap(ce.load_inline))  # torch's signature: the wrapper binds calls to it
    def fake(name, cpp_sources, cuda_sources=None, **kwargs):
        ldflags = kwargs.get("extra_ldflags")
        calls.append({"name": name, **kwargs, "ldflags_seen": list(ldflags or []), "cpp": list(cpp_sources)})
        if isinstance(ldflags, list):
            ldflags.append("-ltorch")  # as torch does: to the caller's own list
        if isinstance(cpp_sources, list):
            cpp_sources.insert(0, "#include <torch/extension.h>")  # as torch does to a source list
        if fail:
            raise fail.pop(0)
        return name

    restore_torch(monkeypatch)
    monkeypatch.setattr(ce, "load_inline", fake)
    monkeypatch.setattr(cache, "BUILDS", [])
    monkeypatch.setenv(cache.SANDBOX_CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("KERNELS_ENV_PCH", "off")
    monkeypatch.delenv(fast_build.MODE_ENV, raising=False)
    monkeypatch.setattr(pch, "_is_gcc", lambda compiler: True)  # whatever this host's compilers are
    for name in fast_build.NVCC_ENV:
        monkeypatch.delenv(name, raising=False)
    hooks.install_build_hooks(False, str(tmp_path))
    hooks.content_keyed_extensions()
    return calls, fail


def restore_torch(monkeypatch):
    """torch's own builders now (whatever an earlier test wrapped them in), and again after the test."""
    for attr in ("load_inline", "load"):
        monkeypatch.setattr(ce, attr, inspect.unwrap(getattr(ce, attr)))
    hook = "_check_and_build_extension_h_precompiler_headers"  # content_keyed_extensions replaces it
    monkeypatch.setattr(ce, hook, getattr(ce, hook))


def build_error(log: str) -> RuntimeError:
    """What torch raises when ninja fails: its first line goes on with the first command ninja ran."""
    first = f"[1/2] c++ {' '.join(GCC_FLAGS)} -c main.cpp"
    return RuntimeError(f"Error building extension 'kx_0': {first}\n{log}")


def test_gcc_flags_go_first_for_main_cpp_and_nvccs_host_compiler(hooked):
    calls, _ = hooked
    ce.load_inline("a", "int f();", cuda_sources="__global__ void k() {}", functions=["f"],
                   extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "--use_fast_math"])  # fmt: skip
    ce.load_inline("b", "int g() { return 2; }", functions=["g"])
    cuda, cpp = calls
    assert cuda["extra_cflags"] == [*GCC_FLAGS, "-O3"]  # the candidate's own flags last: they win
    assert cuda["extra_cuda_cflags"] == [*CUDA_FLAGS, "-O3", "--use_fast_math"]
    assert cpp["extra_cflags"] == GCC_FLAGS and "extra_cuda_cflags" not in cpp
    assert [b["path"] for b in cache.BUILDS] == ["fast", "fast"] and all(b["ok"] for b in cache.BUILDS)
    # "arch" in any nvcc flag stops torch adding its -gencode flags: the fast path's flags have none
    assert not any("arch" in f for f in CUDA_FLAGS)


def test_a_candidate_choosing_the_host_compiler_builds_plain(hooked, monkeypatch):
    calls, _ = hooked
    ce.load_inline("a", "int f();", cuda_sources="__global__ void k() {}", functions=["f"],
                   extra_cuda_cflags=["-ccbin", "clang++"])  # fmt: skip
    assert calls[0]["extra_cuda_cflags"] == ["-ccbin", "clang++"] and "extra_cflags" not in calls[0]
    assert cache.BUILDS[0]["path"] == "plain"
    ce.load_inline("b", "int g() { return 2; }", functions=["g"], extra_cflags="-O3")  # not a list
    assert calls[1]["extra_cflags"] == "-O3" and cache.BUILDS[1]["path"] == "plain"
    monkeypatch.setenv(fast_build.MODE_ENV, "0")  # the switch
    ce.load_inline("c", "int h() { return 3; }", functions=["h"])
    assert "extra_cflags" not in calls[2] and cache.BUILDS[2]["path"] == "plain"


def test_the_real_toolchain_check(monkeypatch):
    if not fast_build.gcc_toolchain({}, cuda=False):
        pytest.skip("torch's C++ compiler is not GCC here")
    assert not fast_build.gcc_toolchain({"extra_cuda_cflags": ["--compiler-bindir=/opt/clang"]}, cuda=True)
    assert not fast_build.gcc_toolchain({"extra_cuda_cflags": [" -ccbin", "gcc-12"]}, cuda=True)
    assert not fast_build.gcc_toolchain({"extra_cuda_cflags": ["-O3 -ccbin clang++"]}, cuda=True)
    monkeypatch.setenv("NVCC_PREPEND_FLAGS", "-ccbin clang")
    assert not fast_build.gcc_toolchain({}, cuda=True)
    monkeypatch.delenv("NVCC_PREPEND_FLAGS")
    monkeypatch.setenv("CC", "/bin/true")  # torch passes -ccbin $CC to nvcc: not a GCC
    assert not fast_build.gcc_toolchain({}, cuda=True) and fast_build.gcc_toolchain({}, cuda=False)


def test_a_rebuild_keeps_the_flags_of_the_first_build(hooked, monkeypatch):
    calls, _ = hooked
    ce.load_inline("a", "int f() { return 1; }", functions=["f"])
    directory = Path(calls[0]["build_directory"])
    (directory / "build.ninja").write_text("cflags = -O3\n")  # built plain (e.g. before this path existed)
    ce.load_inline("a", "int f() { return 1; }", functions=["f"])
    assert calls[1]["build_directory"] == str(directory) and "extra_cflags" not in calls[1]
    (directory / "build.ninja").write_text(f"cflags = {' '.join(GCC_FLAGS)}\n")
    monkeypatch.setenv(fast_build.MODE_ENV, "0")  # built fast: ninja must see the same command again
    ce.load_inline("a", "int f() { return 1; }", functions=["f"])
    assert calls[2]["extra_cflags"] == GCC_FLAGS


def test_a_build_the_flags_broke_is_built_again_plain(hooked):
    calls, fail = hooked
    flag = GCC_FLAGS[0]
    log = f"FAILED: main.o\nc++ {flag} -c x.cpp\ng++: error: unrecognized command-line option '{flag}'"
    fail.append(build_error(log))
    cuda = "__global__ void k() {}"
    assert ce.load_inline("a", "int f();", cuda_sources=cuda, functions=["f"], extra_ldflags=["-lm"])
    fast, plain = calls
    assert fast["extra_cflags"] == GCC_FLAGS and fast["extra_cuda_cflags"] == CUDA_FLAGS
    assert "extra_cflags" not in plain and "extra_cuda_cflags" not in plain
    assert fast["build_directory"] == plain["build_directory"]
    assert fast["ldflags_seen"] == plain["ldflags_seen"] == ["-lm"]  # not the list the attempt changed
    fail.append(build_error(log))
    ce.load_inline("b", ["int g();"], cuda_sources=cuda, functions=["g"])
    assert [c["cpp"] for c in calls[2:]] == [["int g();"], ["int g();"]]  # a source list, too
    records = [(b["path"], b["ok"]) for b in cache.BUILDS]
    assert records == [("fast", False), ("plain-after-fast", True)] * 2
    fail += [build_error(log), build_error("cuda.cu(1): error: the candidate's own")]  # the retry fails too
    with pytest.raises(RuntimeError, match="candidate's own"):
        ce.load_inline("c", "int h();", cuda_sources=cuda, functions=["h"])
    assert [(b["path"], b["ok"]) for b in cache.BUILDS[4:]] == [("fast", False), ("plain-after-fast", False)]
    for log in (
        "nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
        "c++: fatal error: Killed signal terminated program cc1plus",
        "cc1plus: out of memory allocating 65536 bytes",
        "clang: error: unknown argument: '--param=x'",
    ):
        assert fast_build.may_be_the_flags(build_error(log)), log


def test_the_candidates_own_compile_error_is_not_built_twice(hooked):
    calls, fail = hooked
    # ninja echoes the failed command, flags and all: only an error line about them counts
    log = (f"FAILED: cuda.cuda.o\nnvcc {' '.join(CUDA_FLAGS)} -c cuda.cu\n"
           "cuda.cu(5): error: identifier \"missing\" is undefined\n1 error detected")  # fmt: skip
    fail.append(build_error(log))
    with pytest.raises(RuntimeError, match="missing"):
        ce.load_inline("a", "int f();", cuda_sources="__global__ void k() { missing; }", functions=["f"])
    assert len(calls) == 1 and [(b["path"], b["ok"]) for b in cache.BUILDS] == [("fast", False)]
    fail.append(ImportError("undefined symbol: _Z1fv"))  # loading, not building: never the flags
    with pytest.raises(ImportError):
        ce.load_inline("b", "int f();", functions=["f"])
    assert len(calls) == 2


def test_build_records_are_coerced():
    record = {
        "builder": "load_inline",
        "name": "kx_1",
        "path": "fast",
        "headers": "lean",
        "use_pch": True,
        "ok": True,
        "s": 12.5,
    }
    fast, other = assemble.build_records({"builds": [record, "junk", {"path": "made-up", "s": float("nan")}]})
    assert fast == record
    assert other["path"] == "plain" and other["s"] is None and other["ok"] is False
    assert other["headers"] == "as-written"
    assert assemble.build_records({"builds": "x"}) == [] == assemble.build_records(None)


# Real builds -------------------------------------------------------------------------------------------

PYBIND_ONLY = """
#include <pybind11/pybind11.h>
static int add(int a, int b) { return a + b; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
"""


@pytest.fixture
def real(tmp_path, monkeypatch):
    """torch's own load_inline behind the build hooks and the content-keyed wrapper."""
    if not fast_build.gcc_toolchain({}, cuda=False):
        pytest.skip("torch's C++ compiler is not GCC here")
    restore_torch(monkeypatch)
    monkeypatch.setattr(cache, "BUILDS", [])
    monkeypatch.setenv(cache.SANDBOX_CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("KERNELS_ENV_PCH", "off")
    monkeypatch.delenv(fast_build.MODE_ENV, raising=False)
    hooks.install_build_hooks(False, str(tmp_path))
    hooks.content_keyed_extensions()
    ce.JIT_EXTENSION_VERSIONER.entries.clear()
    return tmp_path / "torch_extensions" / "content"


def test_real_fallback_when_gcc_rejects_the_flags(real, monkeypatch):
    monkeypatch.setattr(fast_build, "FLAGS", ("--param=no-such-param=1",))  # g++: invalid --param name
    module = ce.load_inline("pyb_add", PYBIND_ONLY, no_implicit_headers=True)
    assert module.add(2, 3) == 5
    assert [(b["path"], b["ok"]) for b in cache.BUILDS] == [("fast", False), ("plain-after-fast", True)]
    (directory,) = real.iterdir()
    assert "no-such-param" not in (directory / "build.ninja").read_text()
    assert Path(module.__file__).name == f"kx_{directory.name}.so"  # not renamed _v1 by torch


def test_real_fast_build_gives_the_same_object(real, monkeypatch):
    monkeypatch.setenv(fast_build.MODE_ENV, "0")
    assert ce.load_inline("pyb_add", PYBIND_ONLY, no_implicit_headers=True).add(1, 1) == 2
    (directory,) = real.iterdir()
    plain = (directory / "main.o").read_bytes()
    assert fast_build.FLAGS[-1] not in (directory / "build.ninja").read_text()
    shutil.rmtree(directory)
    directory.mkdir()
    monkeypatch.setenv(fast_build.MODE_ENV, "1")
    ce.JIT_EXTENSION_VERSIONER.entries.clear()  # a fresh process's view
    assert ce.load_inline("pyb_add", PYBIND_ONLY, no_implicit_headers=True).add(2, 2) == 4
    assert fast_build.FLAGS[-1] in (directory / "build.ninja").read_text()
    assert (directory / "main.o").read_bytes() == plain
    assert [b["path"] for b in cache.BUILDS] == ["plain", "fast"]


CUDA_SOLUTION = r"""
#include <torch/extension.h>
__global__ void twice_kernel(const float* x, float* out, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i];
}
torch::Tensor twice(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  auto out = torch::empty_like(x);
  int64_t n = x.numel();
  twice_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
  return out;
}
"""
NVCC_TEMP = re.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}")  # nvcc's temporary file names (pid): not code


@pytest.mark.toolchain  # two CUDA builds over torch/extension.h: about 5 minutes on 2 cores
def test_real_cuda_build_fast_and_plain_give_the_same_objects(real, monkeypatch):
    from kernels_env.host.cuda import cuda_home

    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    if ce.CUDA_HOME is None:
        monkeypatch.setattr(ce, "CUDA_HOME", cuda_home())
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setenv(lean_headers.MODE_ENV, "0")  # the .cu as written: nvcc over torch/extension.h
    stubs = hooks.cpu_link_stubs(str(real.parent))  # a CPU-only torch links against stubs (never loads)
    monkeypatch.setattr(ce, "_import_module_from_library", lambda *args: None)
    objects = {}
    for mode in ("0", "1"):
        monkeypatch.setenv(fast_build.MODE_ENV, mode)
        ce.JIT_EXTENSION_VERSIONER.entries.clear()
        for old in real.glob("*"):
            shutil.rmtree(old)  # the same directory both times: objects embed the source's path
        ce.load_inline(
            "twice_ext",
            cpp_sources="torch::Tensor twice(torch::Tensor x);",
            cuda_sources=CUDA_SOLUTION,
            functions=["twice"],
            extra_cflags=["-O3"],
            extra_cuda_cflags=["-O3"],
            extra_ldflags=[f"-L{stubs}"],  # a new list each time: torch appends its libraries to it
        )
        (directory,) = real.iterdir()
        ninja = (directory / "build.ninja").read_text()
        assert (fast_build.FLAGS[-1] in ninja) == (mode == "1")
        kept = shutil.copytree(directory, real.parent / f"built_{mode}")  # to compare by hand on a failure
        objects[mode] = {
            o: NVCC_TEMP.sub(b"tmpxft", (kept / o).read_bytes()) for o in ("main.o", "cuda.cuda.o")
        }
    assert objects["0"] == objects["1"]
    assert [b["path"] for b in cache.BUILDS] == ["plain", "fast"] and all(b["ok"] for b in cache.BUILDS)
