"""Loading problems and solutions, and turning compiler output into diagnostics (no worker processes)."""

from __future__ import annotations

import pytest

from kernels_env.judge.build import diagnostics, loader
from kernels_env.judge.build.diagnostics import parse_compiler_output, trim_traceback
from kernels_env.rules.messages import Source
from kernels_env.rules.result import COMPILE_ERROR, RUNTIME_ERROR

NVCC_OUT = """bad.cu(3): error: identifier "y" is undefined
    x[0] = y;
           ^

bad.cu(7): warning #177-D: variable "unused" was declared but never referenced
1 error detected in the compilation of "bad.cu".
"""
GCC_OUT = """bad.cpp: In function 'int f()':
bad.cpp:1:18: error: 'z' was not declared in this scope
    1 | int f() { return z; }
/usr/bin/ld: cannot find -lfoo: No such file or directory
collect2: error: ld returned 1 exit status
ptxas error   : Entry function 'k' uses too much shared data (0x10000 bytes, 0xc000 max)
"""


def test_parse_nvcc_gcc_ptxas_ld():
    diags = parse_compiler_output(NVCC_OUT + GCC_OUT)
    first = diags[0]
    assert first == {
        "file": "bad.cu",
        "line": 3,
        "column": 10,  # EDG's caret, on the echoed line (2-space indent removed)
        "severity": "error",
        "message": 'identifier "y" is undefined',
    }
    errors = [(d["file"], d["line"], d["column"]) for d in diags if d["severity"] == "error"]
    assert ("bad.cpp", 1, 18) in errors and ("ptxas", None, None) in errors and ("ld", None, None) in errors
    assert diags[-1]["severity"] == "warning" and diags[-1]["line"] == 7  # errors first


def test_load_inline_lines_map_back_to_the_candidates_strings():
    out = '/c/torch_extensions/ab/relu_ext/cuda.cu(8): error: expected a ";"\n'
    out += "/c/torch_extensions/ab/relu_ext/main.cpp:2:5: error: 'foo' was not declared\n"
    diags = parse_compiler_output(out)
    assert (diags[0]["file"], diags[0]["line"]) == ("cuda_sources", 5)  # 3 implicit header lines
    assert (diags[1]["file"], diags[1]["line"]) == ("cpp_sources", 1)  # 1 implicit include


def test_compile_errors_of_every_builder_are_recognised():
    class CompileError(RuntimeError):  # the fast path's, duck-typed
        def __init__(self):
            super().__init__("nvcc failed")
            self.diagnostics = [
                {"file": "/ws/kernels/a.cu", "line": 4, "column": 2, "severity": "error", "message": "boom"}
            ]
            self.log = "..."

    error, messages = diagnostics.compile_error_messages(CompileError(), {"/ws/": "my_ws/"})
    assert "my_ws/kernels/a.cu:4:2: error: boom" in error
    assert messages[0]["line"] == 4 and messages[0]["file"] == "my_ws/kernels/a.cu"
    exc = RuntimeError("Error building extension 'relu': [1/2] nvcc ...\n" + NVCC_OUT)
    error, messages = diagnostics.compile_error_messages(exc, {})
    assert error.startswith("Error building extension 'relu': bad.cu:3") and messages[-1]["kind"] == "log"
    assert diagnostics.compile_error_messages(ValueError("x"), {}) is None


def test_materialize_rejects_escaping_workspace_paths(tmp_path):
    with pytest.raises(loader.LoadError, match="escapes"):
        loader.materialize(Source(name="ws", files={"../evil.py": "", "model_new.py": ""}), tmp_path)
    with pytest.raises(loader.LoadError, match="has no model_new.py"):
        loader.materialize(Source(name="ws", files={"other.py": ""}), tmp_path / "b")
    path = loader.materialize(
        Source(name="ws", files={"model_new.py": "", "kernels/k.cu": "x"}), tmp_path / "c"
    )
    assert path.name == "model_new.py" and (tmp_path / "c" / "kernels" / "k.cu").read_text() == "x"


def load(tmp_path, text, name="sol.py"):
    path = loader.materialize(Source(name=name, text=text), tmp_path)
    return loader.load_solution(path, name)


def test_syntax_error_names_line_and_column(tmp_path):
    with pytest.raises(loader.LoadError) as info:
        load(tmp_path, "import torch\n\ndef f(:\n    pass\n")
    err = info.value
    assert err.status == COMPILE_ERROR and "line 3" in err.error
    assert err.messages[0]["line"] == 3 and err.messages[0]["file"] == "sol.py"


def test_missing_model_new_lists_what_is_there(tmp_path):
    with pytest.raises(loader.LoadError, match=r"defines no class ModelNew \(it defines Model\)"):
        load(tmp_path, "class Model:\n    def forward(self): pass\n")
    with pytest.raises(loader.LoadError, match="ModelNew is a int"):
        load(tmp_path, "ModelNew = 3\n")


def test_import_errors_are_trimmed_to_the_candidates_frames(tmp_path):
    with pytest.raises(loader.LoadError) as info:
        load(tmp_path, "import json\n\ndef helper():\n    return json.loads('{')\n\nhelper()\n")
    tb = info.value.messages[0]["text"]
    assert 'File "sol.py", line 6' in tb and 'File "sol.py", line 4, in helper' in tb
    assert str(tmp_path) not in tb, "harness paths are hidden"
    assert "JSONDecodeError" in info.value.error


def test_signature_checks():
    class M:
        def __init__(self, a, b):
            pass

        def forward(self, x):
            pass

    loader.check_call(M, [1, 2], "ModelNew", COMPILE_ERROR)
    with pytest.raises(loader.LoadError, match=r"ModelNew\(a, b\) cannot take the task's 3 argument"):
        loader.check_call(M, [1, 2, 3], "ModelNew", COMPILE_ERROR)
    with pytest.raises(loader.LoadError) as info:
        loader.check_call(M(1, 2).forward, [1, 2], "ModelNew.forward", RUNTIME_ERROR)
    assert info.value.status == RUNTIME_ERROR


def test_problem_must_be_kernelbench_format(tmp_path):
    path = loader.materialize(Source(name="p.py", text="class Model: pass\n"), tmp_path)
    with pytest.raises(loader.ProblemError, match="lacks get_inputs, get_init_inputs"):
        loader.load_problem(path, "p.py")


def test_trim_keeps_innermost_frame_when_outside_candidate():
    def inner():
        raise ValueError("deep")

    try:
        inner()
    except ValueError as exc:
        text = trim_traceback(exc, set(), {})
    assert "in inner" in text and "ValueError: deep" in text
