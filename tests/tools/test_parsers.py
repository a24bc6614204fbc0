"""Parsers on recorded real outputs: ptxas -v, nvcc/NVRTC diagnostics, cuobjdump/nvdisasm SASS.

ptxas and diagnostics parsing is the fast path's (``kernels_env.fastpath.diagnostics``), used by the tools
through ``_resources``; these tests hold it to the outputs the tools see.
"""

from __future__ import annotations

from tools_fixtures import recorded

from kernels_env.fastpath.diagnostics import format_diagnostic, parse_diagnostics
from kernels_env.tools._resources import ptxas_records, short_kernel_name
from kernels_env.tools._sass import parse_sass


def parse_ptxas(text: str) -> dict:
    return {
        "kernels": ptxas_records(text),
        "diagnostics": [d for d in parse_diagnostics(text) if d["tool"] == "ptxas"],
    }


def test_ptxas_resource_usage_per_kernel():
    k = parse_ptxas(recorded("tiled_smem.nvcc_ptxas_v.txt"))["kernels"]
    by = {x["name"]: x for x in k}
    assert set(by) == {"block_sum", "transpose"}
    assert by["transpose"]["shared_bytes"] == 32 * 33 * 4  # static tile [32][33] floats
    assert by["transpose"]["registers"] == 12 and by["transpose"]["barriers"] == 1
    assert by["block_sum"]["shared_bytes"] == 0  # dynamic shared memory is not in ptxas' count
    assert not any(x["spills"] for x in k)


def test_ptxas_spills_and_register_cap_warning():
    out = parse_ptxas(recorded("spills.nvcc_ptxas_v.txt"))
    (k,) = out["kernels"]
    assert k["registers"] == 24 and k["spills"]
    assert (k["stack_frame_bytes"], k["spill_stores_bytes"], k["spill_loads_bytes"]) == (96, 96, 132)
    assert k["cumulative_stack_bytes"] == 96
    assert (
        out["diagnostics"][0]["severity"] == "warning"
        and "register count" in out["diagnostics"][0]["message"]
    )


def test_ptxas_mangled_names_and_errors():
    (k,) = parse_ptxas(recorded("wmma_gemm.nvcc_ptxas_v.txt"))["kernels"]
    assert k["name"] == "_Z9wmma_gemmILi4EEvPK6__halfS2_Pfiii" and k["short_name"] == "wmma_gemm"
    out = parse_ptxas(recorded("too_much_smem.nvcc_ptxas_v.txt"))
    assert (
        out["diagnostics"][0]["severity"] == "error"
        and "too much shared data" in out["diagnostics"][0]["message"]
    )
    assert out["kernels"][0]["shared_bytes"] == 65536
    (t,) = parse_ptxas(recorded("triton_dot.ptxas_v.txt"))["kernels"]
    assert t["arch"] == "sm_90a" and t["registers"] == 64


def test_short_kernel_names():
    assert (
        short_kernel_name("_ZN2at6native18elementwise_kernelILi128ELi4EEEviT1_")
        == "at::native::elementwise_kernel"
    )
    assert short_kernel_name("void foo<4>(float*, int)") == "foo<4>"
    assert short_kernel_name("vec_add") == "vec_add"


def test_nvcc_diagnostics_with_file_line_column_and_source():
    d = parse_diagnostics(recorded("bad_syntax.nvcc_ptxas_v.txt"))
    assert [(x["severity"], x["line"]) for x in d] == [("error", 5), ("warning", 3), ("warning", 4)]
    assert d[0]["file"] == "bad_syntax.cu" and d[0]["message"] == 'expected a ";"'
    assert d[0]["column"] == 5 and d[0]["source"].startswith("if (i < n)")
    assert d[1]["code"] == "177-D"
    assert format_diagnostic(d[0]) == 'bad_syntax.cu:5:5: error: expected a ";"'


def test_nvrtc_log_and_path_mapping():
    d = parse_diagnostics(
        recorded("undefined_ident.nvrtc_log.txt"), path_map={"undefined_ident.cu": "kernels/k.cu"}
    )
    assert [x["line"] for x in d] == [4, 5]
    assert all(x["file"] == "kernels/k.cu" and x["severity"] == "error" for x in d)
    assert 'identifier "undefined_value" is undefined' in d[1]["message"]
    assert d[1]["column"] == 25  # the caret under `undefined_value` (1-based in the original line)


def test_tool_and_host_compiler_lines():
    text = (
        "ptxas fatal   : Unresolved extern function 'foo'\n"
        "kernel.cu:12:5: error: 'bar' was not declared in this scope\n"
        "nvcc fatal   : Unsupported gpu architecture 'compute_12'\n"
    )
    d = parse_diagnostics(text)
    assert sorted((x["tool"], x["severity"]) for x in d) == [
        ("host", "error"),
        ("nvcc", "error"),
        ("ptxas", "error"),
    ]
    host = next(x for x in d if x["tool"] == "host")
    assert (host["file"], host["line"], host["column"]) == ("kernel.cu", 12, 5)


def test_sass_vector_loads_and_no_tensor_cores():
    mix = parse_sass(recorded("vec_add.cuobjdump_sass.txt"))["vec_add"]
    assert mix["global_loads_by_width"] == {"128": 2} and mix["global_stores_by_width"] == {"128": 1}
    assert mix["vectorized_load_share"] == 1.0
    assert not mix["uses_tensor_cores"] and mix["groups"]["fp32"] == 4
    assert "NOP" not in mix["top_opcodes"]


def test_sass_hmma_from_wmma_both_disassemblers():
    a = parse_sass(recorded("wmma_gemm.cuobjdump_sass.txt"))["_Z9wmma_gemmILi4EEvPK6__halfS2_Pfiii"]
    b = parse_sass(recorded("wmma_gemm.nvdisasm.txt"))["_Z9wmma_gemmILi4EEvPK6__halfS2_Pfiii"]
    assert a["uses_tensor_cores"] and a["tensor_core"] == b["tensor_core"] == {
        "HMMA": a["tensor_core"]["HMMA"]
    }
    assert a["tensor_core"]["HMMA"] >= 2 and "HMMA.16816.F32" in a["tensor_core_variants"]
    assert a["instructions"] == b["instructions"]


def test_sass_hgmma_from_triton_and_spills():
    mix = parse_sass(recorded("triton_dot.cuobjdump_sass.txt"))["dot_kernel"]
    assert mix["tensor_core"].get("HGMMA", 0) >= 1
    assert any(v.startswith("HGMMA.64x64x16") for v in mix["tensor_core_variants"])
    assert mix["global_loads_by_width"].get("16")  # bf16 scalar loads
    sp = parse_sass(recorded("spills.cuobjdump_sass.txt"))["spill_kernel"]
    assert sp["spill_instructions"] > 0 and sp["groups"]["local_memory"] == sp["spill_instructions"]
    sm = parse_sass(recorded("tiled_smem.cuobjdump_sass.txt"))
    assert sm["transpose"]["groups"]["shared_memory"] >= 2 and sm["block_sum"]["groups"]["atomics"] >= 1
