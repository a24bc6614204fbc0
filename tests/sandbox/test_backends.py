"""Which backends a solution uses, read from its parsed imports (``kernels_env.judge.build.backends``): no
workers."""

from __future__ import annotations

import pytest

from kernels_env.judge.build.backends import detect_backends, imported_backends, needs_cuda

KERNEL = "\n@triton.jit\ndef k(x_ptr):\n    tl.store(x_ptr, 1.0)\n"


@pytest.mark.parametrize(
    "source",
    [
        "import torch, triton, triton.language as tl\n",  # the line a new user wrote (issue 29 item 9)
        "import torch\nimport numpy as np, triton\n",
        "from triton import language as tl\nimport triton\n",
        "import triton.language as tl\n",
        "import torch\n\ndef build():\n    import triton.language as tl\n    return tl\n",
        "try:\n    import torch, triton\nexcept ImportError:\n    triton = None\n",
    ],
)
def test_triton_is_found_in_every_form_of_import(source):
    assert detect_backends([source + KERNEL], []) == ["triton"]
    assert not needs_cuda([source + KERNEL], [], [])  # Triton runs under its interpreter in CPU mode


@pytest.mark.parametrize(
    "source",
    [
        "import torch\n# import triton is what we will do next\n",
        'import torch\nNOTE = """\nimport triton\n"""\n',  # an import line inside a string
        "import torch, tritonclient\n",  # a module whose name starts with triton
        "from torch import triton_helpers\n",
    ],
)
def test_only_real_triton_imports_count(source):
    assert detect_backends([source], []) == ["torch"]


def test_cupy_and_fastpath_from_parsed_imports_need_cuda():
    cupy = "import numpy as np, cupy as cp\n"
    assert detect_backends([cupy], []) == ["cupy"] and needs_cuda([cupy], [], [])
    fast = "import torch\nfrom kernels_env import fastpath\n"
    assert detect_backends([fast], []) == ["fastpath"] and needs_cuda([fast], [], [])
    assert imported_backends("from cupyx.scipy import ndimage\n") == {"cupy"}
    assert not needs_cuda(["import torch, triton\n"], [], [])


def test_a_source_that_does_not_parse_falls_back_to_its_import_lines():
    broken = "import torch, triton, triton.language as tl\n\ndef forward(x:\n"
    assert imported_backends(broken) == {"triton"}
    assert detect_backends([broken], []) == ["triton"]
    assert imported_backends("from triton import jit\nclass (\n") == {"triton"}
    assert imported_backends("import torch, cupy as cp\nif :\n") == {"cupy"}
    assert imported_backends("import torch\ndef f(:\n    x = 'import triton'\n") == set()
    # a workspace's CUDA file is not Python: only import lines would count, and it has none
    cu = "#include <cuda_runtime.h>\n__global__ void k(float* x) { x[0] = 1.0f; }\n"
    assert detect_backends(["import torch, triton\n", cu], []) == ["triton"]


def test_a_missing_toolchain_is_not_the_candidates_failure_but_a_syntax_error_is(client):
    """End to end (issue 31): a CuTe DSL solution on a machine without nvidia-cutlass-dsl gets
    ``toolchain_missing`` with no reward; a TileLang solution with a syntax error is its ``compile_error``."""
    from kernels_env.rules.config import JudgeConfig

    from .conftest import RELU_PROBLEM, src
    from .test_toolchains import CUTE_SOLUTION, TILELANG_SOLUTION

    judge = JudgeConfig(time_candidate=False, num_trials=1, families=[])
    res = client.evaluate(reference=src(RELU_PROBLEM), solution=CUTE_SOLUTION, judge=judge)
    assert res["status"] == "toolchain_missing" and res["reward"] is None, res["error"]
    assert res["error"] == "needs nvidia-cutlass-dsl (cutlass.cute), not installed here"
    assert res["backends"] == ["cute_dsl"] and res["stage"] == "compile"
    broken = TILELANG_SOLUTION.replace("def forward(self, a, b):", "def forward(self, a, b)")
    res = client.evaluate(reference=src(RELU_PROBLEM), solution=broken, judge=judge)
    assert res["status"] == "compile_error" and res["reward"] == -1.0, res["error"]
    assert "SyntaxError" in res["error"] or "syntax" in res["error"].lower(), res["error"]
