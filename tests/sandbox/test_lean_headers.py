"""The lean-header build path of load_inline (kernels_env/judge/build/lean_headers.py): which CUDA sources
leave out torch/extension.h and how (same line numbers), which keep it, the as-written retry after any failed
lean build, the run stage's choice read back from the build directory, the switch; this toolchain's
full-header names (one nvcc probe, a few seconds). Slow, with real builds: a benchmark solution builds lean
and a second load_inline rebuilds nothing; lean and as-written builds give byte-identical device code; through
the CPU-mode sandbox a solution using pybind11 and torch::nn::functional builds as written and passes the
compile stage, and a compile error is reported from the as-written build at the candidate's line."""

from __future__ import annotations

import functools
import inspect
import shutil
import subprocess
from pathlib import Path

import pytest
import torch.utils.cpp_extension as ce

from kernels_env.judge.build import cache, fast_build, full_header_names, hooks, lean_headers, pch

NAMES = full_header_names.FullHeaderNames(
    macros=frozenset({"TORCH_VERSION_MAJOR", "PYBIND11_VERSION_MAJOR", "va_start"}),
    names=frozenset({"nn", "optim", "kMean", "parallel_for", "Linear", "N"}),
)
STANDARD = """#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void twice_kernel(const float* x, float* out, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i];
}
torch::Tensor twice(torch::Tensor x) {
  auto out = torch::empty_like(x);
  twice_kernel<<<(unsigned)((x.numel() + 255) / 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(),
                                                               x.numel());
  return out;
}
"""


@functools.cache
def solution_sources() -> dict[str, str]:
    """The load_inline set's solutions, stem -> source (generated in memory: nothing written)."""
    from benchmarks.sandbox.load_inline_set import files

    return {Path(rel).stem: text for rel, text in files().items() if rel.startswith("solutions/")}


def solution_cuda(stem: str) -> dict:
    from benchmarks.sandbox.build_phases import load_inline_args

    return load_inline_args(solution_sources()[stem])


# The rewrite and the decision, no compiler --------------------------------------------------------------


def test_only_full_header_include_lines_become_comments_on_the_same_line():
    text = (
        "#include <torch/extension.h>\n#include <cuda_runtime.h>\n"
        '  #  include "torch/torch.h"  // all of it\r\n'
        "#include <torch/all.h>\n#include <torch/types.h>\n#include <torch/extension.h> /* x */\nint x;\n"
    )
    lean = lean_headers.rewrite(text)
    assert lean is not None and lean.count("\n") == text.count("\n") and "\r\n" in lean
    lines = lean.split("\n")
    assert lines[0].startswith("// torch/extension.h: left out") and lines[1] == "#include <cuda_runtime.h>"
    assert lines[2].startswith("// torch/torch.h: left out") and lines[3].startswith("// torch/all.h: left")
    assert lines[4] == "#include <torch/types.h>"
    assert lines[5] == "#include <torch/extension.h> /* x */"  # a block comment could run on: left alone
    assert lean_headers.rewrite("#include <cuda_runtime.h>\nint x;\n") is None  # nothing to leave out


def test_a_line_that_is_not_a_directive_of_its_own_is_never_rewritten():
    continued = "#define HEADERS \\\n#include <torch/extension.h>\nint x;\n"
    raw = '#include <torch/extension.h>\nconst char* s = R"src(\n#include <torch/extension.h>\n)src";\n'
    assert lean_headers.rewrite(continued) is None and lean_headers.rewrite(raw) is None


@pytest.mark.parametrize(
    "source, reason",
    [
        ("#include <torch/extension.h>\nnamespace F = torch::nn::functional;\n", "torch::nn"),
        ("#include <torch/extension.h>\nusing namespace torch;\nauto l = nn::Linear(2, 2);\n", "nn::"),
        ("#include <torch/extension.h>\nvoid f(py::object o) {}\n", "py::"),
        ("#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n", "PYBIND11_MODULE"),
        ("#include <torch/extension.h>\nPyObject* f();\n", "PyObject"),
        ("#include <torch/extension.h>\nint n = torch::cuda::device_count();\n", "torch::cuda"),
        ("#include <torch/extension.h>\nauto r = torch::kMean;\n", "kMean"),
        ("#include <torch/extension.h>\nvoid f() { at::parallel_for(0, 1, 1, g); }\n", "parallel_for"),
        ("#include <torch/extension.h>\n#if TORCH_VERSION_MAJOR >= 2\n#endif\n", "TORCH_VERSION_MAJOR"),
        ("#define N 4\n#include <torch/extension.h>\n", "'N' before the include"),
    ],
)
def test_sources_that_need_the_full_header_keep_it(source, reason):
    why = lean_headers.why_as_written(source, NAMES)
    assert why is not None and reason in why, why


def test_standard_sources_go_lean():
    after = "#include <torch/extension.h>\n#define N 4\n// py::object and torch::nn in a comment\nint x[N];\n"
    for text in (STANDARD, after, solution_cuda("33_row_softmax")["cuda_sources"]):
        assert lean_headers.why_as_written(text, NAMES) is None
    assert "unknown" in lean_headers.why_as_written(STANDARD, None)  # no probe, no lean build


@pytest.fixture(scope="module")
def toolchain_names(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    names = full_header_names.load(tmp_path_factory.mktemp("lean_names"))
    assert names is not None
    return names


def test_this_toolchains_full_header_names(toolchain_names):
    """What torch/extension.h alone brings, as found by the probe: the frontend's and Python's names and
    macros, not ATen's (torch/types.h has those); every benchmark solution goes lean."""
    assert {"TORCH_VERSION_MAJOR", "PYBIND11_VERSION_MAJOR", "PY_MAJOR_VERSION"} <= toolchain_names.macros
    assert {"TORCH_CHECK", "AT_DISPATCH_FLOATING_TYPES", "__CUDACC__"}.isdisjoint(toolchain_names.macros)
    assert {"nn", "optim", "kMean", "save", "Sequential", "set_num_threads"} <= toolchain_names.names
    assert {"Tensor", "empty_like", "data_ptr", "TensorOptions"}.isdisjoint(toolchain_names.names)
    for stem in sorted(solution_sources()):
        text = solution_cuda(stem)["cuda_sources"]
        assert lean_headers.why_as_written(text, toolchain_names) is None, stem


# Through the sandbox's wrapper, torch's load_inline faked -----------------------------------------------


@pytest.fixture
def hooked(tmp_path, monkeypatch):
    """The build hooks and content-keyed wrapper around a fake torch load_inline that records its
    arguments and changes list arguments in place as torch does; ``fail`` makes the next calls raise."""
    calls: list[dict] = []
    fail: list[Exception] = []

    @functools.wraps(inspect.unwrap(ce.load_inline))
    def fake(name, cpp_sources, cuda_sources=None, **kwargs):
        calls.append({"name": name, "cpp": list(cpp_sources), "cuda": cuda_sources, **kwargs})
        if isinstance(cpp_sources, list):
            cpp_sources.insert(0, "#include <torch/extension.h>")
        if fail:
            raise fail.pop(0)
        return name

    for attr in ("load_inline", "load"):
        monkeypatch.setattr(ce, attr, inspect.unwrap(getattr(ce, attr)))
    hook = "_check_and_build_extension_h_precompiler_headers"
    monkeypatch.setattr(ce, hook, getattr(ce, hook))
    monkeypatch.setattr(ce, "load_inline", fake)
    monkeypatch.setattr(cache, "BUILDS", [])
    monkeypatch.setattr(lean_headers, "_names", lambda: NAMES)
    monkeypatch.setattr(pch, "_is_gcc", lambda compiler: True)
    monkeypatch.setenv(cache.SANDBOX_CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("KERNELS_ENV_PCH", "off")
    monkeypatch.delenv(lean_headers.MODE_ENV, raising=False)
    monkeypatch.delenv(fast_build.MODE_ENV, raising=False)
    hooks.install_build_hooks(False, str(tmp_path))
    hooks.content_keyed_extensions()
    return calls, fail


def build_error(text: str) -> RuntimeError:
    return RuntimeError(f"Error building extension 'kx_0': [1/3] nvcc -c cuda.cu\n{text}")


def test_a_standard_source_builds_lean_and_pybind_as_written(hooked):
    calls, _ = hooked
    ce.load_inline("a", ["torch::Tensor twice(torch::Tensor x);"], cuda_sources=STANDARD, functions=["twice"])
    assert calls[0]["cuda"] == lean_headers.rewrite(STANDARD)
    pybind = STANDARD + "void g(py::object o) {}\n"
    ce.load_inline("b", "torch::Tensor twice(torch::Tensor x);", cuda_sources=pybind, functions=["twice"])
    assert calls[1]["cuda"] == pybind
    ce.load_inline("c", "int f();", cuda_sources=STANDARD, functions=["f"], no_implicit_headers=True)
    assert calls[2]["cuda"] == STANDARD  # no torch/types.h first: nothing to stand in for the include
    ce.load_inline("d", "int f();", cuda_sources=(STANDARD,), functions=["f"])
    assert calls[3]["cuda"] == (STANDARD,)  # torch itself fails on a tuple: it must see the same
    assert [(b["headers"], b["path"], b["ok"]) for b in cache.BUILDS] == [
        ("lean", "fast", True), *[("as-written", "fast", True)] * 3]  # fmt: skip


def test_a_failed_lean_build_is_built_again_as_written(hooked):
    calls, fail = hooked
    fail.append(build_error('cuda.cu(9): error: identifier "va_list" is undefined'))
    sources = ["torch::Tensor twice(torch::Tensor x);"]
    kwargs = {"functions": ["twice"], "extra_ldflags": ["-lm"]}
    assert ce.load_inline("a", sources, cuda_sources=[STANDARD], **kwargs) == calls[1]["name"]
    lean, written = calls
    assert lean["cuda"] == lean_headers.rewrite(STANDARD) and written["cuda"] == [STANDARD]
    assert lean["build_directory"] == written["build_directory"] and lean["name"] == written["name"]
    assert written["cpp"] == ["torch::Tensor twice(torch::Tensor x);"]  # not the list torch extended
    assert written["extra_ldflags"] == ["-lm"]
    records = [(b["headers"], b["ok"]) for b in cache.BUILDS]
    assert records == [("lean", False), ("as-written-after-lean", True)]


def test_a_compile_error_is_the_as_written_builds(hooked):
    calls, fail = hooked
    fail += [build_error("cuda.cu(6): error: lean"), build_error("cuda.cu(6): error: as written")]
    with pytest.raises(RuntimeError, match="as written"):
        ce.load_inline("a", "int f();", cuda_sources=STANDARD, functions=["f"])
    assert len(calls) == 2
    records = [(b["headers"], b["ok"]) for b in cache.BUILDS]
    assert records == [("lean", False), ("as-written-after-lean", False)]
    fail.append(ImportError("undefined symbol: _Z1fv"))  # not a build failure: no second build
    with pytest.raises(ImportError):
        ce.load_inline("b", "int f();", cuda_sources=STANDARD + "\n", functions=["f"])
    assert len(calls) == 3 and cache.BUILDS[-1]["headers"] == "lean"


def test_the_build_directory_keeps_its_choice(hooked, monkeypatch):
    calls, _ = hooked
    ce.load_inline("a", "int f();", cuda_sources=STANDARD, functions=["f"])
    directory = Path(calls[0]["build_directory"])
    prelude = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
    (directory / "cuda.cu").write_text(prelude + lean_headers.rewrite(STANDARD))  # as torch writes it
    monkeypatch.setenv(lean_headers.MODE_ENV, "0")  # the run stage still asks for the lean build
    ce.load_inline("a", "int f();", cuda_sources=STANDARD, functions=["f"])
    assert calls[1]["cuda"] == calls[0]["cuda"] and calls[1]["build_directory"] == str(directory)
    monkeypatch.setenv(lean_headers.MODE_ENV, "1")
    (directory / "cuda.cu").write_text(prelude + STANDARD)  # built as written (e.g. after a failed lean)
    ce.load_inline("a", "int f();", cuda_sources=STANDARD, functions=["f"])
    assert calls[2]["cuda"] == STANDARD
    monkeypatch.setenv(lean_headers.MODE_ENV, "0")  # the switch, for a fresh build
    ce.load_inline("b", "int g();", cuda_sources=STANDARD + "int g() { return 1; }\n", functions=["g"])
    assert calls[3]["cuda"].startswith("#include <torch/extension.h>")
    own = Path(calls[0]["build_directory"]).parent / "own"  # a directory the candidate chose: the same rule
    monkeypatch.setenv(lean_headers.MODE_ENV, "1")
    ce.load_inline("c", "int f();", cuda_sources=STANDARD, functions=["f"], build_directory=str(own))
    assert calls[4]["cuda"] == lean_headers.rewrite(STANDARD) and calls[4]["build_directory"] == str(own)


# Real builds (slow: nvcc over torch headers, about a minute each on 2 cores) -----------------------------


@pytest.fixture
def real(tmp_path, monkeypatch):
    """torch's own load_inline behind the hooks and the content-keyed wrapper, CUDA built against CPU link
    stubs and never loaded (a CPU-only torch cannot load it)."""
    from kernels_env.host.cuda import cuda_home

    if shutil.which("nvcc") is None or not fast_build.gcc_toolchain({}, cuda=True):
        pytest.skip("no nvcc, or the compilers are not GCC")
    for attr in ("load_inline", "load"):
        monkeypatch.setattr(ce, attr, inspect.unwrap(getattr(ce, attr)))
    hook = "_check_and_build_extension_h_precompiler_headers"
    monkeypatch.setattr(ce, hook, getattr(ce, hook))
    if ce.CUDA_HOME is None:
        monkeypatch.setattr(ce, "CUDA_HOME", cuda_home())
    monkeypatch.setattr(cache, "BUILDS", [])
    monkeypatch.setenv(cache.SANDBOX_CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("KERNELS_ENV_PCH", "off")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.delenv(lean_headers.MODE_ENV, raising=False)
    monkeypatch.setattr(ce, "_import_module_from_library", lambda *args: None)
    hooks.install_build_hooks(False, str(tmp_path))
    hooks.content_keyed_extensions()
    ce.JIT_EXTENSION_VERSIONER.entries.clear()
    return tmp_path


def build_args(stem: str, stubs: str) -> dict:
    args = solution_cuda(stem)
    return {**args, "extra_ldflags": [*args.get("extra_ldflags", []), f"-L{stubs}"]}  # a fresh list


@pytest.mark.toolchain  # one lean build: about a minute on 2 cores
def test_real_lean_build_and_the_run_stage_rebuilds_nothing(real, monkeypatch):
    stubs = hooks.cpu_link_stubs(str(real))
    ce.load_inline(**build_args("01_relu", stubs))
    (directory,) = (real / "torch_extensions" / "content").iterdir()
    cuda = (directory / "cuda.cu").read_text()
    assert "#include <torch/extension.h>" not in cuda and "// torch/extension.h: left out" in cuda
    assert cuda.count("\n") == 3 + solution_cuda("01_relu")["cuda_sources"].count("\n")  # same line numbers
    built = {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.suffix in (".o", ".so")}
    assert len(built) == 3
    ce.JIT_EXTENSION_VERSIONER.entries.clear()  # the run stage: a fresh process, the switch off
    monkeypatch.setenv(lean_headers.MODE_ENV, "0")
    ce.load_inline(**build_args("01_relu", stubs))
    assert {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.suffix in (".o", ".so")} == built
    assert [(b["headers"], b["ok"]) for b in cache.BUILDS] == [("lean", True), ("lean", True)]
    assert cache.BUILDS[1]["s"] < 5  # ninja found nothing to do


DISPATCH_HALF = r"""
#include <torch/extension.h>
#include <ATen/Dispatch.h>
template <typename scalar_t>
__global__ void gelu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = static_cast<float>(x[i]);
    out[i] = static_cast<scalar_t>(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
  }
}
torch::Tensor gelu(torch::Tensor x) {
  auto out = torch::empty_like(x);
  int64_t n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "gelu", [&] {
    gelu_kernel<scalar_t><<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<scalar_t>(),
                                                              out.data_ptr<scalar_t>(), n);
  });
  return out;
}
"""


@pytest.mark.toolchain  # three extensions built both ways: about 8 minutes on 2 cores
def test_real_lean_and_as_written_builds_give_the_same_device_code(real, monkeypatch):
    from kernels_env.tools._sass import find_cuda_binary

    cuobjdump = find_cuda_binary("cuobjdump")
    if cuobjdump is None:
        pytest.skip("no cuobjdump")
    stubs = hooks.cpu_link_stubs(str(real))
    dispatch = {"name": "gelu_ext", "cpp_sources": "torch::Tensor gelu(torch::Tensor x);",
                "cuda_sources": DISPATCH_HALF, "functions": ["gelu"]}  # fmt: skip
    content = real / "torch_extensions" / "content"
    for label, make in (
        ("33_row_softmax", lambda: build_args("33_row_softmax", stubs)),
        ("07_gelu_tanh", lambda: build_args("07_gelu_tanh", stubs)),
        ("dispatch_half", lambda: {**dispatch, "extra_ldflags": [f"-L{stubs}"]}),
    ):
        cubins = {}
        for mode in ("1", "0"):
            monkeypatch.setenv(lean_headers.MODE_ENV, mode)
            ce.JIT_EXTENSION_VERSIONER.entries.clear()
            for old in content.glob("*") if content.is_dir() else []:
                shutil.rmtree(old)  # the same directory both times: a fresh build each
            ce.load_inline(**make())
            (directory,) = content.iterdir()
            lean = "#include <torch/extension.h>" not in (directory / "cuda.cu").read_text()
            assert lean == (mode == "1"), label
            out = real / f"{label}_{mode}"
            out.mkdir()
            subprocess.run([cuobjdump, "-xelf", "all", str(directory / "cuda.cuda.o")], cwd=out, check=True,
                           capture_output=True, timeout=120)  # fmt: skip
            cubins[mode] = {p.name: p.read_bytes() for p in out.iterdir()}
        assert cubins["1"] and cubins["1"] == cubins["0"], label  # byte-identical sm_90 cubins
    headers = [b["headers"] for b in cache.BUILDS]
    assert headers == ["lean", "as-written"] * 3 and all(b["ok"] for b in cache.BUILDS)


PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(1024) - 0.5]

def get_init_inputs():
    return []
"""
SOLUTION = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""%s"""
ext = load_inline(name="lean_case_%s", cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu_cuda"])

class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cuda(x)
'''
RELU = """#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* out, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] > 0.f ? x[i] : 0.f;%s
}
torch::Tensor relu_cuda(torch::Tensor x) {
  auto out = torch::empty_like(x);%s
  relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
  return out;
}
"""


@pytest.mark.toolchain  # two builds through the CPU-mode sandbox: about 4 minutes on 2 cores
def test_real_sandbox_verdicts(tmp_path):
    """A source using pybind11 and torch::nn::functional builds as written and passes the compile stage
    (``not_run``: CPU mode cannot load CUDA); a compile error comes from the as-written build, at the line
    of the candidate's own string."""
    from kernels_env.client import SandboxClient
    from kernels_env.rules.config import JudgeConfig

    from .conftest import cpu_config

    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    frontend = RELU % ("", "\n  out = torch::nn::functional::relu(out);\n  pybind11::object unused;")
    broken = RELU % ("\n  out[i] += missing_name;", "")
    # the default memory limit: an as-written build (g++ and cicc over the full header at once) passes 4 GB
    config = cpu_config(tmp_path, compile_timeout_s=900, num_compile_workers=2, memory_limit_gb=16.0)
    judge = JudgeConfig(time_candidate=False)
    with SandboxClient(config) as sb:
        ok = sb.submit(PROBLEM, SOLUTION % (frontend, "frontend"), judge)
        bad = sb.submit(PROBLEM, SOLUTION % (broken, "broken"), judge)
        ok, bad = ok.result(), bad.result()
    assert ok["status"] == "not_run", (ok["error"], ok["messages"])
    assert [(b["headers"], b["ok"]) for b in ok["durations_s"]["builds"]] == [("as-written", True)]
    assert bad["status"] == "compile_error"
    diag = next(m for m in bad["messages"] if m["kind"] == "compiler" and m["severity"] == "error")
    assert diag["file"] == "cuda_sources" and diag["line"] == 5 and "missing_name" in diag["message"]
    records = [(b["headers"], b["ok"]) for b in bad["durations_s"]["builds"]]
    assert records == [("lean", False), ("as-written-after-lean", False)]
