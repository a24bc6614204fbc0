"""nvcc builds of shared libraries: command lines, the cache key, compiling (in parallel per file), linking,
and turning the compiler's output into diagnostics and per-kernel resource usage."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import toolchain
from .diagnostics import CompileError, demangle, parse_diagnostics, parse_ptxas_resources, truncate_log
from .prototypes import parse_extern_c
from .sources import SourceSet

ARTIFACT = "lib.so"
SUPPORT_HEADER = "kernels_env_fastpath_support.h"
# Pre-included into the first translation unit: lets the loader read (and clear) the CUDA runtime's last
# error after every call and turn codes into cudaGetErrorString text without finding libcudart itself.
SUPPORT_SOURCE = """#pragma once
#include <cuda_runtime.h>
extern "C" int kernels_env_fastpath_last_error(void) { return (int)cudaGetLastError(); }
extern "C" const char* kernels_env_fastpath_error_string(int code) {
  return cudaGetErrorString((cudaError_t)code);
}
"""
SUPPORT_SYMBOLS = ("kernels_env_fastpath_last_error", "kernels_env_fastpath_error_string")


def compile_timeout_s() -> float:
    return float(os.environ.get("KERNELS_ENV_COMPILE_TIMEOUT", "600"))


def _has_flag(flags: Sequence[str], *prefixes: str) -> bool:
    return any(f == p or f.startswith(p) for f in flags for p in prefixes)


def compile_flags(arch: str, extra: Sequence[str], include_dirs: Sequence[str]) -> list[str]:
    """Flags of every translation unit; defaults give way to the caller's own -O / arch / -cudart."""
    extra = list(extra)
    flags = []
    if not _has_flag(extra, "-O", "--optimize"):
        flags.append("-O3")
    if not _has_flag(extra, "-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code"):
        flags += toolchain.arch_flags(arch)
    if not _has_flag(extra, "-cudart", "--cudart"):
        flags += ["-cudart", "shared"]
    flags += ["-Xcompiler", "-fPIC", "-lineinfo", "-Xptxas", "-v"]
    flags += [f"-I{d}" for d in include_dirs]
    return flags + extra


def link_flags(libraries: Sequence[toolchain.CudaLibraryFiles], extra_names: Sequence[str]) -> list[str]:
    flags = ["-shared", "-Xlinker", "--no-undefined"]
    home = toolchain.cuda_home()
    if home:  # fallback for libcudart.so.13 when the process has not loaded torch's copy
        for sub in ("lib64", "lib"):
            if os.path.isdir(os.path.join(home, sub)):
                flags.append(f"-Xlinker=-rpath,{os.path.join(home, sub)}")
                break
    for lib in libraries:
        flags += lib.link_flags
    flags += [f"-l{n}" for n in extra_names]
    return flags


def resolve_libraries(names: Sequence[str]) -> tuple[list[toolchain.CudaLibraryFiles], list[str]]:
    """(found CUDA libraries, names passed to the linker as plain -l<name>).

    A library with known headers (cublas, cudnn, ...) must be found, or the build fails with a clear
    message; other names (e.g. ``cuda``, ``m``) are left to the linker's own search.
    """
    found, plain = [], []
    for name in names:
        lib = toolchain.find_cuda_library(name)
        if lib is not None:
            found.append(lib)
        elif name in toolchain._HEADERS:
            raise CompileError(
                f"CUDA library '{name}' not found: need lib{name}.so* and {toolchain._HEADERS[name]} under "
                "CUDA_HOME, a pip nvidia-* wheel, /usr or KERNELS_ENV_LIBRARY_PATH",
                tool="nvcc",
            )
        else:
            plain.append(name)
    return found, plain


def key_payload(
    srcs: SourceSet,
    arch: str,
    flags: Sequence[str],
    libraries: Sequence[toolchain.CudaLibraryFiles],
    plain_libs: Sequence[str],
    nvcc: str,
    version: str,
) -> dict:
    return {
        "kind": "nvcc-shared-library",
        "fastpath_version": version,
        "sources": srcs.fingerprint(),
        "arch": arch,
        "flags": list(flags),
        "libraries": [[lib.name, lib.link_name, lib.fingerprint] for lib in libraries] + list(plain_libs),
        "nvcc": toolchain.nvcc_version(nvcc),
        "host_compiler": toolchain.host_compiler_version(),
        "nvcc_env": {k: os.environ.get(k, "") for k in toolchain.NVCC_ENV},
        "support": SUPPORT_SOURCE,
    }


def run_tool(cmd: list[str], cwd: Path, timeout_s: float) -> tuple[int, str]:
    """(return code, stdout+stderr). The tool stays in the caller's process group, so a supervisor that
    kills a compile worker's group also ends nvcc, cicc and ptxas; on timeout the whole tree is killed."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        out, _ = proc.communicate()
        return -9, (out or "") + f"\n{cmd[0]}: killed after the {timeout_s:.0f} s compile timeout"
    except BaseException:
        _kill_tree(proc)
        raise
    return proc.returncode, out or ""


def _kill_tree(proc: subprocess.Popen) -> None:
    try:
        import psutil

        children = psutil.Process(proc.pid).children(recursive=True)
    except Exception:  # psutil missing or the process already gone: kill what we can reach
        children = []
    for child in children:
        with contextlib.suppress(Exception):
            child.kill()
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _exports(path: Path) -> list[str] | None:
    nm = shutil.which("nm")
    if nm is None:
        return None
    proc = subprocess.run([nm, "-D", "--defined-only", str(path)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return None
    return sorted(
        {ln.split()[-1] for ln in proc.stdout.splitlines() if len(ln.split()) >= 3 and ln.split()[1] == "T"}
    )


def build_shared_library(
    srcs: SourceSet,
    name: str,
    nvcc: str,
    flags: Sequence[str],
    lflags: Sequence[str],
    staging: Path,
    work: Path,
) -> dict:
    """Compiles ``srcs`` into ``staging/lib.so``; returns the meta to cache. Raises CompileError."""
    start = time.perf_counter()
    for rel, text in srcs.written.items():
        dest = work / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
    (work / SUPPORT_HEADER).write_text(SUPPORT_SOURCE)
    support = ["--pre-include", str(work / SUPPORT_HEADER)]
    path_map = dict(srcs.path_map)
    path_map[str(work) + "/"] = ""
    inputs = [f.path or f.display for f in srcs.compiled]
    output = staging / ARTIFACT
    timeout = compile_timeout_s()
    commands: list[list[str]] = []
    logs: list[str] = []

    if len(inputs) == 1:
        cmd = [nvcc, *flags, *support, *lflags, inputs[0], "-o", str(output)]
        commands.append(cmd)
        rc, log = run_tool(cmd, work, timeout)
        logs.append(log)
        failed = rc != 0
    else:
        objs = [work / "obj" / f"{i}.o" for i in range(len(inputs))]
        (work / "obj").mkdir()
        cmds = [
            [nvcc, *flags, *(support if i == 0 else []), "-c", src, "-o", str(obj)]
            for i, (src, obj) in enumerate(zip(inputs, objs))
        ]
        with ThreadPoolExecutor(max_workers=min(len(cmds), os.cpu_count() or 1)) as pool:
            results = list(pool.map(lambda c: run_tool(c, work, timeout), cmds))
        commands += cmds
        logs += [log for _, log in results]
        failed = any(rc != 0 for rc, _ in results)
        if not failed:
            cmd = [nvcc, *_link_only(flags), *lflags, *map(str, objs), "-o", str(output)]
            commands.append(cmd)
            rc, log = run_tool(cmd, work, timeout)
            logs.append(log)
            failed = rc != 0
    log = _clean("\n".join(x for x in logs if x.strip()), path_map)
    diagnostics = parse_diagnostics(log, "nvcc", sources=srcs.texts(), path_map=path_map)
    if failed:
        raise CompileError(f"nvcc failed to build '{name}'", diagnostics, log, tool="nvcc")
    resources = parse_ptxas_resources(log)
    names = demangle(r.name for r in resources)
    for r in resources:
        r.demangled = names.get(r.name, r.name)
    prototypes = [p for f in srcs.compiled for p in parse_extern_c(f.text)]
    return {
        "kind": "nvcc",
        "name": name,
        "compile_seconds": time.perf_counter() - start,
        "commands": [[_clean(a, path_map) for a in c] for c in commands],
        "log": truncate_log(log),
        "diagnostics": diagnostics,
        "resources": [r.to_dict() for r in resources],
        "exports": _exports(output),
        "declared": [p.name for p in prototypes],
        "nvcc_release": toolchain.nvcc_release(nvcc),
    }


def _link_only(flags: Sequence[str]) -> list[str]:
    """The flags the link step needs from the compile flags (arch for the device link, -cudart)."""
    out, it = [], iter(flags)
    for f in it:
        if f.startswith(("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code")):
            out.append(f)
            if f in ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code"):
                out.append(next(it, ""))
        elif f in ("-cudart", "--cudart"):
            out += [f, next(it, "")]
        elif f.startswith(("-cudart=", "--cudart=", "-L", "-l", "-Xlinker", "--linker-options")):
            out.append(f)
    return out


def _clean(text: str, path_map: dict[str, str]) -> str:
    """Replaces temporary and absolute paths by the names the user gave (longest first)."""
    for prefix in sorted(path_map, key=len, reverse=True):
        text = text.replace(prefix, path_map[prefix])
    return text
