"""KernelBench's other backends (``kernels_env.judge.build.toolchains``, issue 31): a CuTe DSL, TileLang or
ThunderKittens solution on a machine without the toolchain is ``toolchain_missing`` (the package named, no
reward), decided from its sources before any candidate code runs; in-process, no workers."""

from __future__ import annotations

import textwrap

import pytest

from kernels_env.judge.assemble import result as assemble
from kernels_env.judge.assemble.replies import screen_compile as _screen_compile
from kernels_env.judge.build import backends, compile_stage, toolchains
from kernels_env.rules.messages import CompileRequest, Source
from kernels_env.rules.result import NO_VERDICT, TOOLCHAIN_MISSING
from kernels_env.rules.rewards import REWARDS, get_reward

# Written for this test in the style of KernelBench's CuTe DSL and TileLang one-shot examples (an
# elementwise add); neither package is installed in the CPU test environment.
CUTE_SOLUTION = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack

    @cute.kernel
    def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * 128 + tidx
        gC[i] = gA[i] + gB[i]

    @cute.jit
    def add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
        add_kernel(mA, mB, mC).launch(grid=(mA.shape[0] // 128, 1, 1), block=(128, 1, 1))

    class ModelNew(nn.Module):
        def forward(self, a, b):
            c = torch.empty_like(a)
            add(from_dlpack(a), from_dlpack(b), from_dlpack(c))
            return c
    """
)
TILELANG_SOLUTION = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import tilelang
    import tilelang.language as T

    def elementwise_add(n, block=256, dtype="float32"):
        @T.prim_func
        def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

        return tilelang.compile(main, out_idx=[2])

    class ModelNew(nn.Module):
        def forward(self, a, b):
            return elementwise_add(a.numel())(a, b)
    """
)
KITTENS_SOLUTION = textwrap.dedent(
    '''
    import torch
    from torch.utils.cpp_extension import load_inline

    SOURCE = """
    #include "kittens.cuh"
    using namespace kittens;
    """
    add = load_inline(name="tk_add", cpp_sources="", cuda_sources=SOURCE)
    '''
)


def test_cute_dsl_and_tilelang_solutions_name_the_missing_package():
    (cute,) = toolchains.missing([CUTE_SOLUTION])
    assert cute == {"backend": "cute_dsl", "package": "nvidia-cutlass-dsl", "what": "cutlass.cute"}
    assert toolchains.error_line([cute]) == "needs nvidia-cutlass-dsl (cutlass.cute), not installed here"
    (tile,) = toolchains.missing([TILELANG_SOLUTION])
    assert tile == {"backend": "tilelang", "package": "tilelang", "what": "tilelang"}
    both = toolchains.missing([CUTE_SOLUTION, TILELANG_SOLUTION])
    assert [m["package"] for m in both] == ["nvidia-cutlass-dsl", "tilelang"]
    assert backends.detect_backends([CUTE_SOLUTION], []) == ["cute_dsl"]
    assert backends.detect_backends([TILELANG_SOLUTION], []) == ["tilelang"]
    assert backends.needs_cuda([TILELANG_SOLUTION], [], [])  # installed in CPU mode: compiled, then not_run


def test_thunderkittens_headers_are_looked_up_in_its_checkout(tmp_path, monkeypatch):
    monkeypatch.setattr(toolchains, "KITTENS_DEFAULT", str(tmp_path / "absent"))
    monkeypatch.delenv("THUNDERKITTENS_ROOT", raising=False)
    monkeypatch.delenv("TK_ROOT", raising=False)
    (tk,) = toolchains.missing([KITTENS_SOLUTION])
    assert tk["package"] == "ThunderKittens" and "kittens.cuh" in tk["what"]
    assert "thunderkittens" in backends.detect_backends([KITTENS_SOLUTION], [])
    # A header in a workspace's .cu file counts too; with a checkout it is judged as usual.
    assert toolchains.missing(["import torch\n"], ["#include <kittens.cuh>\n"])
    (tmp_path / "tk" / "include").mkdir(parents=True)
    (tmp_path / "tk" / "include" / "kittens.cuh").write_text("#pragma once\n")
    monkeypatch.setenv("THUNDERKITTENS_ROOT", str(tmp_path / "tk"))
    assert toolchains.missing([KITTENS_SOLUTION]) == []


def test_an_installed_toolchain_is_judged_as_usual(tmp_path, monkeypatch):
    (tmp_path / "tilelang").mkdir()
    (tmp_path / "tilelang" / "__init__.py").write_text("raise RuntimeError('never imported by the check')\n")
    (tmp_path / "cutlass").mkdir()
    (tmp_path / "cutlass" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert toolchains.missing([TILELANG_SOLUTION]) == []
    # ``cutlass`` without ``cute`` (say the older CUTLASS Python interface): CuTe DSL is still missing.
    assert toolchains.missing([CUTE_SOLUTION])[0]["what"] == "cutlass.cute"
    assert toolchains.missing(["import cutlass\n"]) == []
    (tmp_path / "cutlass" / "cute").mkdir()
    assert toolchains.missing([CUTE_SOLUTION]) == []


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ntry:\n    import tilelang\nexcept ImportError:\n    tilelang = None\n",
        "try:\n    from cutlass import cute\nexcept (ModuleNotFoundError, RuntimeError):\n    cute = None\n",
        "import torch\n# import tilelang\nDOC = 'import cutlass'\n",
    ],
)
def test_optional_imports_and_mentions_need_nothing(source):
    assert toolchains.missing([source]) == []


def test_a_syntax_error_stays_the_candidates_compile_error():
    broken = TILELANG_SOLUTION.replace("def forward(self, a, b):", "def forward(self, a, b)")
    assert toolchains.required_modules(broken) is None and toolchains.missing([broken]) == []
    req = CompileRequest(
        id="r", reference=Source("ref.py", "x"), solution=Source("sol.py", broken), workdir=".", timeout_s=60
    )
    assert compile_stage.toolchain_report(req) is None  # the compile child imports it: its SyntaxError


def test_the_verdict_has_no_reward_and_only_the_worker_can_say_it():
    req = CompileRequest(
        id="r",
        reference=Source("ref.py", "x"),
        solution=Source("sol.py", CUTE_SOLUTION),
        workdir=".",
        timeout_s=60,
    )
    report = _screen_compile(compile_stage.toolchain_report(req))
    assert report["status"] == TOOLCHAIN_MISSING and report["stage"] == "compile"
    assert report["error"] == "needs nvidia-cutlass-dsl (cutlass.cute), not installed here"
    result = assemble.verdict(report, {}, {"problem": "p", "solution": "s"}, "r", {})
    assert result["backends"] == ["cute_dsl"] and TOOLCHAIN_MISSING in NO_VERDICT
    assert all(get_reward(name)(TOOLCHAIN_MISSING, {}) is None for name in REWARDS)
    # A compile child (which ran candidate code) claiming it is a forgery.
    lines = b'{"reference": "ok"}\n{"status": "ok", "toolchain_missing": [{"package": "tilelang"}]}\n'
    forged = compile_stage._parse_report(lines, req)
    assert forged["status"] == "rejected" and forged["check"] == "protocol_forgery"
    claimed = _screen_compile({"status": "toolchain_missing"})  # a status the compile stage may not report
    assert claimed["status"] == "rejected"
