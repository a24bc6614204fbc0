"""Derives each load_inline/<task>.py from benchmarks/sandbox/solutions/fastpath/<task>.py (into the cache).

The two variants must run the SAME CUDA code, so the load_inline one is generated: it keeps ``CUDA_SRC``
byte for byte (kernels and ``extern "C"`` launchers), adds a thin torch C++ wrapper per launcher
(``<launcher>_torch``: tensors -> pointers, torch's current stream), builds with
``torch.utils.cpp_extension.load_inline`` as KernelBench solutions do, and keeps ``ModelNew`` with
``_lib.<launcher>(`` calls rewritten to ``_mod.<launcher>_torch(``.

``load_inline_fast/<task>.py`` is the same extension in load_inline's fastest documented form: the torch
wrappers in ``cpp_sources`` (g++, with torch's precompiled ``torch/extension.h``: ``use_pch=True``) and
``cuda_sources`` only the CUDA source (``no_implicit_headers=True``: nvcc never parses torch's headers).

    python -m benchmarks.sandbox.load_inline_variants [--out DIR]  # write them (default: the cache)

The variants are not kept in git: ``variants_dir()`` generates them on first use (``_generated``) into a
directory named for their contents, so they always match the fast-path sources.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

from benchmarks.sandbox._generated import materialize
from kernels_env.fastpath.args import ArgSpec, specs_for
from kernels_env.fastpath.prototypes import Prototype, parse_extern_c

FASTPATH = Path(__file__).resolve().parent / "solutions" / "fastpath"
VARIANTS = {"load_inline": False, "load_inline_fast": True}  # directory -> load_inline's fastest form


def _cpp_param(spec: ArgSpec) -> str:
    if spec.kind == "pointer":
        return f"std::optional<torch::Tensor> {spec.name}"
    if spec.kind == "float":
        return f"double {spec.name}"
    if spec.kind == "bool":
        return f"bool {spec.name}"
    return f"int64_t {spec.name}"


def _cpp_arg(spec: ArgSpec) -> str:
    if spec.kind == "stream":
        return "at::cuda::getCurrentCUDAStream()"
    ctype = spec.ctype_text
    if spec.kind == "pointer":
        return f'({ctype})ptr_of({spec.name}, "{spec.name}")'
    return f"({ctype}){spec.name}"


def glue(protos: list[Prototype]) -> tuple[str, str, list[str]]:
    """(C++ wrappers appended to the CUDA source, their declarations for cpp_sources, function names)."""
    body = [
        "",
        "#include <torch/extension.h>",
        "#include <ATen/cuda/CUDAContext.h>",
        "",
        "static void* ptr_of(const std::optional<torch::Tensor>& t, const char* name) {",
        "  if (!t.has_value()) return nullptr;",
        '  TORCH_CHECK(t->is_cuda() && t->is_contiguous(), name, " must be a contiguous CUDA tensor");',
        "  return t->data_ptr();",
        "}",
    ]
    decls, names = [], []
    for proto in protos:
        specs = specs_for(proto)
        params = [s for s in specs if s.kind != "stream"]
        sig = f"void {proto.name}_torch({', '.join(_cpp_param(s) for s in params)})"
        wrapped_sig = f"void {proto.name}_torch(" + ",\n    ".join(_cpp_param(s) for s in params) + ")"
        call = f"{proto.name}(\n      " + ",\n      ".join(_cpp_arg(s) for s in specs) + ")"
        body += [
            "",
            wrapped_sig + " {",
            f"  int err = (int){call};",
            f'  TORCH_CHECK(err == 0, "{proto.name} failed with error ", err, ": ",',
            "              cudaGetErrorString((cudaError_t)err));",
            "}",
        ]
        decls.append(sig + ";")
        names.append(f"{proto.name}_torch")
    return "\n".join(body) + "\n", "\n".join(decls), names


FAST_NOTE = (
    "; its fastest documented form: the wrappers in\ncpp_sources with use_pch=True, no torch headers in "
    "the CUDA source).\n\n"
)


def generate(fastpath_file: Path, fast: bool = False) -> str:
    text = fastpath_file.read_text()
    tree = ast.parse(text)
    cuda_src, build = None, None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "CUDA_SRC":
                cuda_src = ast.literal_eval(node.value)
            elif node.targets[0].id == "_lib":
                build = node
    if cuda_src is None or build is None:
        raise ValueError(f"{fastpath_file}: needs CUDA_SRC = r'''...''' and _lib = cuda_library(...)")
    kwargs = {k.arg: ast.literal_eval(k.value) for k in build.value.keywords}
    libraries = tuple(kwargs.get("libraries", ()))
    protos = parse_extern_c(cuda_src)
    glue_src, decls, names = glue(protos)
    task = fastpath_file.stem
    lines = text.splitlines()
    header = ast.get_docstring(tree).splitlines()[0].rstrip(".,;")
    doc = (
        f'"""{header.split(" (")[0]}: the CUDA source of benchmarks/sandbox/solutions/fastpath/{task}.py,\n'
        "built with torch.utils.cpp_extension.load_inline (KernelBench style"
        + (FAST_NOTE if fast else ").\n\n")
        + "Generated by benchmarks.sandbox.load_inline_variants into the cache: edit the fastpath variant.\n"
        '"""\n\n# ruff: noqa: E501  (generated C++ wrappers)'
    )
    if fast:  # torch/extension.h must stay the first line of main.cpp: only then can g++ use the PCH
        externs = "".join(f'extern "C" {p};\n' for p in protos if not p.kernel)
        includes = "#include <ATen/cuda/CUDAContext.h>\n"
        cpp_src = glue_src.lstrip("\n").replace(includes, includes + "\n" + externs, 1)
        build_lines = [f'CPP_SRC = r"""{cpp_src}"""', ""]
    else:
        build_lines = [
            f'TORCH_GLUE = r"""{glue_src}"""',
            "",
            f"CPP_DECLS = {json.dumps(decls)}",
            "",
        ]
    extra = []
    if libraries:
        build_lines += [
            f"_libs = [find_cuda_library(name) for name in {json.dumps(list(libraries))}]",
            "if None in _libs:",
            f'    raise RuntimeError("CUDA libraries not found (headers and .so): {", ".join(libraries)}")',
            "",
        ]
        extra = [
            "    extra_include_paths=[lib.include_dir for lib in _libs if lib.include_dir],",
            "    extra_ldflags=[flag for lib in _libs for flag in lib.host_link_flags],",
        ]
    build_lines += [
        "_mod = load_inline(",
        f'    name="bench_{task}{"_fast" if fast else ""}",',
        "    cpp_sources=CPP_SRC," if fast else "    cpp_sources=CPP_DECLS,",
        "    cuda_sources=CUDA_SRC," if fast else "    cuda_sources=CUDA_SRC + TORCH_GLUE,",
        f"    functions={json.dumps(names)},",
        '    extra_cuda_cflags=["-O3"],',
        *(["    use_pch=True,", "    no_implicit_headers=True,"] if fast else []),
        *extra,
        "    verbose=False,",
        ")",
    ]
    doc_end = tree.body[0].end_lineno
    body = lines[doc_end : build.lineno - 1] + build_lines + lines[build.end_lineno :]
    out = "\n".join([doc, *body]) + "\n"
    replacement = "from kernels_env.fastpath import find_cuda_library\n" if libraries else ""
    out = out.replace("from kernels_env.fastpath import cuda_library\n", replacement)
    load = "from torch.utils.cpp_extension import load_inline\n"
    out = out.replace("import torch.nn as nn\n", "import torch.nn as nn\n" + load, 1)
    out = re.sub(r"\n\n\n+(?=CUDA_SRC)", "\n\n", out)
    out = re.sub(r"\b_lib\.(\w+)\(", r"_mod.\1_torch(", out)
    return out


def files() -> dict[str, str]:
    """``<variant>/<task>.py`` -> source, for every fast-path solution and both variants."""
    return {
        f"{directory}/{src.name}": generate(src, fast)
        for directory, fast in VARIANTS.items()
        for src in sorted(FASTPATH.glob("*.py"))
    }


def variants_dir(root: Path | None = None) -> Path:
    """The directory holding ``load_inline/`` and ``load_inline_fast/`` (generated if missing)."""
    return materialize("load_inline_variants", files(), root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write here (default: the cache)")
    args = parser.parse_args(argv)
    print(f"load_inline variants of {len(files()) // 2} solutions in {variants_dir(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
